"""Kafka's JAAS config syntax, as ``sasl.jaas.config`` values carry it:

    org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret" username="admin";

One or more login modules, each ``<class> <flag> [key=value ...];`` with values quoted or bare
(Kafka's JaasConfig parser, which reads them with a StreamTokenizer: quoted strings keep
everything but ``\\`` escapes).  Only the options are needed here (PLAIN's ``user_<name>``)."""
from __future__ import annotations

import re
from typing import Iterator

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


class JaasError(ValueError):
    pass


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError("invalid JAAS config near position %d" % pos)
        pos = m.end()
        if m.group(1) is not None:
            yield ("str", re.sub(r"\\(.)", r"\1", m.group(1)))
        elif m.group(2) is not None:
            yield ("word", m.group(2))
        elif m.group(3):
            yield ("=", "=")
        else:
            yield (";", ";")
        while pos < len(text) and text[pos].isspace():
            pos += 1


def parse_jaas(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """[(login module class, control flag, options)]; JaasError says what is wrong (never the
    values: they are secrets)."""
    toks = list(_tokens(text))
    out, i = [], 0
    while i < len(toks):
        kind, cls = toks[i]
        if kind != "word":
            raise JaasError("invalid JAAS config: expected a login module class")
        if i + 1 >= len(toks) or toks[i + 1][0] != "word" or toks[i + 1][1].lower() not in _FLAGS:
            raise JaasError("invalid JAAS config: login module %s has no control flag" % cls)
        flag = toks[i + 1][1].lower()
        i += 2
        opts: dict[str, str] = {}
        while i < len(toks) and toks[i][0] != ";":
            if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=" or toks[i + 2][0] not in ("str", "word"):
                raise JaasError("invalid JAAS config: expected key=value in login module %s" % cls)
            opts[toks[i][1]] = toks[i + 2][1]
            i += 3
        if i >= len(toks):
            raise JaasError("invalid JAAS config: login module %s does not end with ';'" % cls)
        i += 1
        out.append((cls, flag, opts))
    if not out:
        raise JaasError("invalid JAAS config: no login module")
    return out


def plain_users(text: str) -> dict[str, str]:
    """PLAIN's users (``user_<name>="<password>"`` options of the PlainLoginModule)."""
    users = {}
    for cls, _flag, opts in parse_jaas(text):
        if not cls.endswith("PlainLoginModule"):
            continue
        for k, v in opts.items():
            if k.startswith("user_"):
                users[k[5:]] = v
    return users


def login_module_options(text: str, module_suffix: str) -> dict[str, str]:
    """The options of the first login module whose class ends with ``module_suffix``."""
    for cls, _flag, opts in parse_jaas(text):
        if cls.endswith(module_suffix):
            return dict(opts)
    return {}
