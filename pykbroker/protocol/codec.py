"""Codecs generated from ``protocol_specs/`` (sans-IO: bytes in, dicts out, and back).

Choice (measured with ``compat/bench/micro/bench_codec.py``; numbers in ARCHITECTURE.md): codecs are generated
*at import time, lazily per (api, version, direction)*: the first use of e.g. Produce v9 requests
turns its spec into Python source — one flat function per struct, runs of fixed-size fields read
with a single ``struct`` call — and ``exec``s it (~0.4 ms per codec, once).  Nothing is compiled
ahead of time, so there is no generated file to keep in sync with ``protocol_specs/`` and
``import`` stays at ~25 ms; only the versions clients actually use are ever compiled.

Messages are plain dicts keyed by snake_case field names.  Decoding fills every field of the
version, using the spec default for fields the version lacks, so handlers can read any field
at any version.  Encoding takes missing keys as the spec default.

``records`` fields decode to a zero-copy ``memoryview`` of the frame.  On encode a records value
may be ``None``, a bytes-like object, or a :class:`Chunks` (a list of bytes and file regions with
a known total size): the encoder then returns several parts so Fetch can ``sendfile`` segment
bytes without copying them through Python.
"""
from __future__ import annotations

import json
import os
import re
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, IO, Union

from . import primitives as P
from .primitives import ProtocolError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    # One field of a spec, as protocol_specs/ JSON has it (name, type, versions, ...).
    Field = dict[str, Any]
    # Where the specs are: a directory path, or a Traversable inside a zip.
    SpecsDir = Union[str, Traversable]


def specs_dir() -> SpecsDir:
    """The protocol specs shipped inside the package (``pykbroker/protocol/specs``; in a source
    checkout a symlink to the top-level ``protocol_specs/``, the copy that is edited), found
    through importlib.resources so that every kind of install has them: a path (str) when the
    package is on disk, else a Traversable (a zipapp)."""
    # A package on disk: the directory itself, without importlib.resources' readers (their
    # import, zipfile's included, costs a few ms of every start-up)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs")
    if os.path.isdir(here):
        return here
    from importlib.resources import files

    specs = files(__package__).joinpath("specs")
    if not specs.is_dir():
        raise RuntimeError("the protocol specs are missing from the pykbroker package (%s): "
                           "reinstall pykbroker" % specs)
    return str(specs) if isinstance(specs, os.PathLike) else specs


class Chunks:
    """A records value made of parts (bytes or objects with fd/position/length)."""

    __slots__ = ("parts", "size")

    # parts: bytes, or storage file regions (fd/position/length); protocol/ does not import
    # storage/, so they stay Any here.
    def __init__(self, parts: Iterable[Any] | None = None) -> None:
        self.parts: list[Any] = []
        self.size = 0
        for p in parts or ():
            self.add(p)

    def add(self, part: Any) -> None:
        self.parts.append(part)
        self.size += part.length if hasattr(part, "length") else len(part)

    def __len__(self) -> int:
        return self.size


_FIXED = {
    "int8": ("I8", 1, 0), "int16": ("I16", 2, 0), "uint16": ("U16", 2, 0),
    "int32": ("I32", 4, 0), "uint32": ("U32", 4, 0), "int64": ("I64", 8, 0),
    "float64": ("F64", 8, 0.0),
}


# Fixed-size scalars that a run of consecutive fields can share one struct.Struct for
# (Kafka booleans: any non-zero byte is true, which is what '?' decodes).
_SCALAR_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                 "int64": "q", "float64": "d", "bool": "?"}

_ARRAY_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                "int64": "q", "float64": "d"}


def _in(rng: list[int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def default_of(f: Field) -> Any:
    if f["type"] == "array":
        return None if "default" in f and f["default"] is None and _nullable_any(f) else []
    if "default" in f:
        return f["default"]
    t = f["type"]
    if t in _FIXED:
        return _FIXED[t][2]
    if t == "bool":
        return False
    if t == "string":
        return ""
    if t in ("bytes",):
        return b""
    if t == "records":
        return None
    if t == "uuid":
        return P.ZERO_UUID
    if t == "struct":
        return None
    raise ValueError(t)


def _nullable_any(f: Field) -> bool:
    return "nullable" in f


def _one_by_one(fields: Iterable[Field], emit_run: Callable[[list[Field]], None]) -> Iterator[Field]:
    """The fields that need code of their own, in order; each stretch of consecutive
    fixed-size scalars between them goes to emit_run(run) instead, for one struct call."""
    run: list[Field] = []
    for f in fields:
        if f["type"] in _SCALAR_CODES:
            run.append(f)
            continue
        if run:
            emit_run(run)
            run = []
        yield f
    if run:
        emit_run(run)


class _Gen:
    """Turns one spec tree at one version into Python source."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.v = version
        self.flex = flexible
        self.lines: list[str] = []
        self.n = 0
        self.consts: dict[str, Any] = {}

    def name(self, base: str) -> str:
        self.n += 1
        return "%s_%d" % (base, self.n)

    def const(self, value: Any) -> str:
        k = "C%d" % len(self.consts)
        self.consts[k] = value
        return k

    # ---------------------------------------------------------------- decode
    def read_expr(self, f: Field, t: str, item: bool = False) -> str:
        """Source of an expression evaluating to (value, pos) for a scalar type ``t`` (``item``:
        an element of the array field ``f``: never nullable, whatever ``f``'s nullability, which
        is the array's; Kafka's readers reject a null string or bytes element)."""
        compact = self.flex and not f.get("never_compact")
        nullable = not item and _in(f.get("nullable"), self.v)
        if t in _FIXED:
            s, size, _ = _FIXED[t]
            return "(%s.unpack_from(buf, pos)[0], pos + %d)" % (s, size)
        if t == "bool":
            return "(buf[pos] != 0, pos + 1)"
        if t == "uuid":
            return "P.read_uuid(buf, pos)"
        if t == "string":
            fn = {(0, 0): "read_string", (0, 1): "read_nullable_string",
                  (1, 0): "read_compact_string", (1, 1): "read_compact_nullable_string"}
            return "P.%s(buf, pos)" % fn[(compact, nullable)]
        if t == "bytes":
            fn = {(0, 0): "read_bytes", (0, 1): "read_nullable_bytes",
                  (1, 0): "read_compact_bytes", (1, 1): "read_compact_nullable_bytes"}
            return "P.%s(buf, pos)" % fn[(compact, nullable)]
        if t == "records":
            return "P.%s(buf, pos)" % ("read_compact_records" if compact else "read_records")
        raise ValueError(t)

    def decode_struct(self, fields: list[Field]) -> str:
        fn = self.name("d")
        body = ["def %s(buf, pos):" % fn, "    m = {}"]
        tagged: list[Field] = []

        def on_wire() -> Iterator[Field]:
            # Lazily, so each default lands in the source where its field stands in the spec.
            for f in fields:
                is_tagged = self.flex and _in(f.get("tagged"), self.v)
                if is_tagged or not _in(f["versions"], self.v):
                    body.append("    m[%r] = %s" % (f["name"], self._default_src(f)))
                    if is_tagged:
                        tagged.append(f)
                    continue
                yield f

        def unpack(run: list[Field]) -> None:
            st = self.const(struct.Struct(">" + "".join(_SCALAR_CODES[f["type"]] for f in run)))
            keys = ", ".join("m[%r]" % f["name"] for f in run)
            body.append("    %s%s = %s.unpack_from(buf, pos); pos += %d"
                        % (keys, "," if len(run) == 1 else "", st, self.consts[st].size))

        for f in _one_by_one(on_wire(), unpack):
            body.extend("    " + ln for ln in self._decode_field(f, repr(f["name"])))
        if self.flex:
            # Almost every struct carries no tagged fields: a single 0 byte, checked inline.
            body.append("    if buf[pos] == 0:")
            body.append("        return m, pos + 1")
            body.append("    ntag, pos = P.read_uvarint(buf, pos)")
            body.append("    for _ in range(ntag):")
            body.append("        tag, pos = P.read_uvarint(buf, pos)")
            body.append("        size, pos = P.read_uvarint(buf, pos)")
            body.append("        end = pos + size")
            body.append("        if end > len(buf): raise ProtocolError('tagged field overruns the frame')")
            first = True
            for f in tagged:
                body.append("        %s tag == %d:" % ("if" if first else "elif", f["tag"]))
                first = False
                body.append("            sub = buf[:end]")
                inner = self._decode_field(f, repr(f["name"]), bufname="sub")
                body.extend("            " + ln for ln in inner)
            body.append("        pos = end  # unknown tags are skipped, as Kafka does")
        body.append("    return m, pos")
        self.lines.extend(body)
        return fn

    def _default_src(self, f: Field) -> str:
        d = default_of(f)
        if f["type"] == "struct":
            if _in(f.get("nullable"), self.v) or not f.get("fields"):
                return "None"
            # A struct absent from the version decodes to its defaults.
            return "{%s}" % ", ".join(
                "%r: %s" % (sf["name"], self._default_src(sf)) for sf in f["fields"])
        if isinstance(d, (list, dict, bytes)):
            return repr(d) if not isinstance(d, list) else "[]"
        return repr(d)

    def _decode_field(self, f: Field, key: str, bufname: str = "buf") -> list[str]:
        t = f["type"]
        compact = self.flex and not f.get("never_compact")
        out: list[str] = []
        rd = (lambda e: e.replace("(buf,", "(%s," % bufname).replace("from(buf", "from(%s" % bufname)
              .replace("buf[pos]", "%s[pos]" % bufname))
        if t == "array":
            cnt = "P.read_compact_array_count" if compact else "P.read_array_count"
            out.append("n, pos = %s(%s, pos)" % (cnt, bufname))
            out.append("if n is None:")
            if _in(f.get("nullable"), self.v):
                out.append("    m[%s] = None" % key)
            else:
                out.append("    raise ProtocolError('null array for non-nullable field %s')" % f["name"])
            out.append("else:")
            if f["of"] in _FIXED:
                # Fixed-size items (replica lists, partition ids...): one struct call for the
                # whole array instead of one per item; a short buffer raises struct.error.
                code, size = _ARRAY_CODES[f["of"]], _FIXED[f["of"]][1]
                out.append("    m[%s] = list(_unpack('>%%d%s' %% n, %s, pos)); pos += %d * n"
                           % (key, code, bufname, size))
                return out
            out.append("    lst = []")
            out.append("    for _ in range(n):")
            if f["of"] == "struct":
                sub = self.decode_struct(f["fields"])
                out.append("        x, pos = %s(%s, pos)" % (sub, bufname))
            else:
                out.append("        x, pos = %s" % rd(self.read_expr(f, f["of"], item=True)))
            out.append("        lst.append(x)")
            out.append("    m[%s] = lst" % key)
        elif t == "struct":
            sub = self.decode_struct(f["fields"])
            if _in(f.get("nullable"), self.v):
                out.append("if %s[pos] == 255:" % bufname)
                out.append("    m[%s] = None; pos += 1" % key)
                out.append("else:")
                out.append("    m[%s], pos = %s(%s, pos + 1)" % (key, sub, bufname))
            else:
                out.append("m[%s], pos = %s(%s, pos)" % (key, sub, bufname))
        else:
            out.append("m[%s], pos = %s" % (key, rd(self.read_expr(f, t))))
        return out

    # ---------------------------------------------------------------- encode
    def write_src(self, f: Field, t: str, val: str) -> list[str]:
        compact = self.flex and not f.get("never_compact")
        if t in _FIXED:
            return ["out += %s.pack(%s)" % (_FIXED[t][0], val)]
        if t == "bool":
            return ["out.append(1 if %s else 0)" % val]
        if t == "uuid":
            return ["out += (%s or ZERO_UUID)" % val]
        if t == "string":
            return ["P.write_string(out, %s, %s)" % (val, compact)]
        if t == "bytes":
            return ["P.write_bytes(out, %s, %s)" % (val, compact)]
        if t == "records":
            return ["out = _records(out, parts, %s, %s)" % (val, compact)]
        raise ValueError(t)

    def encode_struct(self, fields: list[Field]) -> str:
        fn = self.name("e")
        body = ["def %s(out, parts, m):" % fn]
        wire: list = []
        tagged: list = []
        for f in fields:
            if _in(f["versions"], self.v):
                (tagged if self.flex and _in(f.get("tagged"), self.v) else wire).append(f)

        def pack(run: list[Field]) -> None:
            st = self.const(struct.Struct(">" + "".join(_SCALAR_CODES[f["type"]] for f in run)))
            args = ", ".join("m.get(%r, %s)" % (f["name"], self._default_src(f)) for f in run)
            body.append("    out += %s.pack(%s)" % (st, args))

        for f in _one_by_one(wire, pack):
            dflt = self._default_src(f)
            body.append("    val = m.get(%r, %s)" % (f["name"], dflt))
            body.extend("    " + ln for ln in self._encode_field(f, "val"))
        if self.flex:
            if not tagged:
                body.append("    out.append(0)")
            else:
                body.append("    tags = []")
                for f in tagged:
                    d = self.const(default_of(f))
                    body.append("    val = m.get(%r, %s)" % (f["name"], d))
                    body.append("    if val is not None and val != %s:" % d)
                    body.append("        saved = out; out = bytearray()")
                    body.extend("        " + ln for ln in self._encode_field(f, "val"))
                    body.append("        tags.append((%d, out)); out = saved" % f["tag"])
                body.append("    P.write_uvarint(out, len(tags))")
                body.append("    for tag, data in tags:")
                body.append("        P.write_uvarint(out, tag); P.write_uvarint(out, len(data)); out += data")
        body.append("    return out")
        self.lines.extend(body)
        return fn

    def _encode_field(self, f: Field, val: str) -> list[str]:
        t = f["type"]
        compact = self.flex and not f.get("never_compact")
        out: list[str] = []
        if t == "array":
            out.append("if %s is None:" % val)
            out.append("    P.write_array_count(out, None, %s)" % compact)
            out.append("else:")
            out.append("    P.write_array_count(out, len(%s), %s)" % (val, compact))
            out.append("    for x in %s:" % val)
            if f["of"] == "struct":
                sub = self.encode_struct(f["fields"])
                out.append("        out = %s(out, parts, x)" % sub)
            else:
                out.extend("        " + ln for ln in self.write_src(f, f["of"], "x"))
        elif t == "struct":
            sub = self.encode_struct(f["fields"])
            if _in(f.get("nullable"), self.v):
                out.append("if %s is None:" % val)
                out.append("    out.append(255)")
                out.append("else:")
                out.append("    out.append(1); out = %s(out, parts, %s)" % (sub, val))
            else:
                out.append("out = %s(out, parts, %s or {})" % (sub, val))
        else:
            out.extend(self.write_src(f, t, val))
        return out


def _records(out: bytearray, parts: list[Any], val: bytes | bytearray | memoryview | Chunks | None,
             compact: bool) -> bytearray:
    if val is None:
        P.write_bytes(out, None, compact)
        return out
    if isinstance(val, Chunks):
        if compact:
            P.write_uvarint(out, val.size + 1)
        else:
            out += P.I32.pack(val.size)
        # Flush what is encoded so far, then the chunk parts themselves (no copy of regions).
        # The buffer itself, not a copy: it is not written to again (a new one is returned),
        # and encode_framed patches the response header into the first part in place.
        parts.append(out)
        parts.extend(val.parts)
        return bytearray()
    P.write_bytes(out, val, compact)
    return out


# a response's size prefix and correlation id (the first 8 bytes of its frame)
_SIZE_AND_CORRELATION = struct.Struct(">ii")

_NS: dict[str, Any] = {"P": P, "ProtocolError": ProtocolError, "I8": P.I8, "I16": P.I16, "U16": P.U16,
                       "I32": P.I32, "U32": P.U32, "I64": P.I64, "F64": P.F64, "ZERO_UUID": P.ZERO_UUID,
                       "_records": _records, "_unpack": struct.unpack_from}


def _compile(fields: list[Field], version: int, flexible: bool, direction: str) -> tuple[Callable[..., Any], str]:
    g = _Gen(version, flexible)
    if direction == "decode":
        top = g.decode_struct(fields)
    else:
        top = g.encode_struct(fields)
    src = "\n".join(g.lines)
    ns = dict(_NS)
    ns.update(g.consts)
    exec(compile(src, "<codec v%d %s>" % (version, direction), "exec"), ns)
    return ns[top], src


class ApiSpec:
    """One API of ``protocol_specs/``.  Its field lists (``request``, ``response``) are read from
    the spec file by their first use (``path``): at start-up only each file's head is read (key,
    name, versions), which is all dispatch needs before a request of that API arrives."""

    __slots__ = ("api_key", "name", "min_version", "max_version", "flexible_from", "_fields", "_path",
                 "_cache")

    def __init__(self, api_key: int, name: str, min_version: int, max_version: int, flexible_from: int,
                 request: list | None = None, response: list | None = None,
                 path: SpecsDir | None = None) -> None:
        self.api_key = api_key
        self.name = name
        self.min_version = min_version
        self.max_version = max_version
        self.flexible_from = flexible_from
        self._fields = None if request is None else (request, response)
        self._path = path
        self._cache: dict = {}

    @property
    def request(self) -> list:
        return (self._fields or self._load())[0]

    @property
    def response(self) -> list:
        return (self._fields or self._load())[1]

    def _load(self) -> tuple:
        with _open(self._path) as fh:  # type: ignore[arg-type]  # only specs given by path load
            d = json.load(fh)
        self._fields = (d["request"], d["response"])
        return self._fields

    def __repr__(self) -> str:
        return "ApiSpec(api_key=%d, name=%r, min_version=%d, max_version=%d, flexible_from=%d)" % (
            self.api_key, self.name, self.min_version, self.max_version, self.flexible_from)

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def _fn(self, kind: str, direction: str, version: int) -> Callable:
        key = (kind, direction, version)
        fn = self._cache.get(key)
        if fn is None:
            if not self.min_version <= version <= self.max_version:
                raise ProtocolError("%s v%d is not supported" % (self.name, version))
            fields = self.request if kind == "request" else self.response
            fn, _ = _compile(fields, version, self.flexible(version), direction)
            self._cache[key] = fn
        return fn

    def source(self, kind: str, direction: str, version: int) -> str:
        fields = self.request if kind == "request" else self.response
        return _compile(fields, version, self.flexible(version), direction)[1]

    def decode(self, kind: str, version: int, buf: bytes | bytearray | memoryview, pos: int = 0, exact: bool = True) -> dict:
        """Decode one message; any malformed input raises ProtocolError."""
        fn = self._fn(kind, "decode", version)
        try:
            m, end = fn(buf, pos)
        except ProtocolError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError) as e:
            raise ProtocolError("%s v%d %s: %s" % (self.name, version, kind, e)) from None
        if exact and end != len(buf):
            # Trailing bytes: Kafka's parser rejects a body that does not end where it should.
            raise ProtocolError("%s v%d %s: %d trailing bytes" % (self.name, version, kind, len(buf) - end))
        return m

    def encode(self, kind: str, version: int, msg: dict) -> list:
        """Encode to a list of parts (bytes, and file regions from Chunks records)."""
        fn = self._fn(kind, "encode", version)
        parts: list = []
        out = fn(bytearray(), parts, msg)
        if out:
            parts.append(bytes(out))
        return parts

    def encode_framed(self, version: int, msg: dict, correlation_id: int, flexible_header: bool) -> list:
        """A response, framed: the parts of ``encode`` with the size prefix and response header
        (v1 = v0 + an empty tagged-field byte) in front.  The header's bytes are reserved at the
        start of the encode buffer and filled in afterwards, so a one-buffer answer (nearly
        all, Produce among them) is encoded into the buffer that is sent: no header + body
        concatenation, no copy of the body."""
        fn = self._fn("response", "encode", version)
        head = 9 if flexible_header else 8
        parts: list = []
        out = fn(bytearray(head), parts, msg)
        if out or not parts:   # (empty only after file regions, which flushed the rest)
            parts.append(out)
        first = parts[0]   # a bytearray that starts with the reserved header bytes
        size = -4
        for p in parts:
            size += p.length if hasattr(p, "length") else len(p)
        _SIZE_AND_CORRELATION.pack_into(first, 0, size, correlation_id)
        # (a flexible header's tagged-field count is the reserved ninth byte, already 0)
        return parts

    def encode_bytes(self, kind: str, version: int, msg: dict) -> bytes:
        parts = self.encode(kind, version, msg)
        if any(not isinstance(p, (bytes, bytearray)) for p in parts):
            raise TypeError("message holds file regions; use encode()")
        return b"".join(parts)


# The head every spec file starts with (tools/import_spec.py writes them so); a file that does
# not is parsed whole at once.
_HEAD = re.compile(r'\{\s*"api_key":\s*(\d+),\s*"name":\s*"([^"\\]*)",\s*"versions":\s*\[(\d+),\s*(\d+)\],'
                   r'\s*"flexible_from":\s*(\d+),')


def load_specs(path: SpecsDir | None = None) -> dict[int, ApiSpec]:
    """Every API's spec; the field lists are parsed by their first use (see ``ApiSpec``).
    ``path``: a directory (str) or an importlib.resources Traversable; default the package's."""
    path = path or specs_dir()
    files: list[tuple[str, SpecsDir]]
    if isinstance(path, str):
        files = [(n, os.path.join(path, n)) for n in sorted(os.listdir(path))]
    else:
        files = sorted(((f.name, f) for f in path.iterdir()), key=lambda nf: nf[0])
    apis: dict[int, ApiSpec] = {}
    for name, file in files:
        if not name.endswith(".json") or not name[:2].isdigit():
            continue
        with _open(file) as fh:
            m = _HEAD.match(fh.read(512))
        if m:
            key, api_name, lo, hi, flex = m.groups()
            apis[int(key)] = ApiSpec(int(key), api_name, int(lo), int(hi), int(flex), path=file)
            continue
        with _open(file) as fh:
            d = json.load(fh)
        apis[d["api_key"]] = ApiSpec(d["api_key"], d["name"], d["versions"][0], d["versions"][1],
                                     d["flexible_from"], d["request"], d["response"])
    return apis


def _open(file: SpecsDir) -> IO[str]:
    """A spec file: a path (str), or an importlib.resources Traversable (inside a zip)."""
    return open(file) if isinstance(file, str) else file.open()


APIS: dict[int, ApiSpec] = load_specs()
BY_NAME: dict[str, ApiSpec] = {a.name: a for a in APIS.values()}
