"""``SecurityStore``: SCRAM credentials, client quotas and ACL bindings of a cluster, in ZooKeeper
as Kafka's ZK mode keeps them, and every broker's view of them following the change
notifications.  The one owner of the ``/config/users|clients|ips`` znodes and of the
``/config/changes`` listener.

SCRAM credentials (AK ``ZkAdminManager.alterUserScramCredentials``, ``AdminZkClient.changeConfigs``,
``ScramCredentialUtils``):
- ``/config/users/<sanitized user>`` = ``{"version":1,"config":{"SCRAM-SHA-256":"salt=..,stored_key=..,
  server_key=..,iterations=N", ...}}``: the same config entity as the user's client quotas, so a
  write keeps every key it does not own (compare-and-set on the znode's version);
- then a persistent sequential ``/config/changes/config_change_<seq>`` =
  ``{"version":2,"entity_path":"users/<sanitized user>"}``; every broker watches
  ``/config/changes`` and re-reads the entities named by notices newer than the last it handled
  (Kafka's ZkNodeChangeNotificationListener + DynamicConfigManager).
- user names sanitized as Kafka's ``Sanitizer`` does (URL-encoded, ``*`` -> ``%2A``, space ->
  ``%20``).

Client quotas (AK ``ZkAdminManager.alterClientQuotas`` / ``describeClientQuotas``,
``ConfigEntityName.Default``, DynamicConfigManager's ``ClientIdConfigHandler`` /
``UserConfigHandler`` / ``IpConfigHandler``):
- entity -> znode: user ``/config/users/<u>``, client-id ``/config/clients/<c>``, both
  ``/config/users/<u>/clients/<c>``, ip ``/config/ips/<ip>``; names sanitized as above, the
  default entity named ``<default>``; the same ``{"version":1,"config":{...}}`` JSON, values as
  strings: the LONG/INT keys (``producer_byte_rate``, ``consumer_byte_rate``,
  ``connection_creation_rate``) as whole numbers (``"1024"``), the DOUBLE keys
  (``request_percentage``, ``controller_mutation_rate``) as Java's Double.toString (``"50.0"``);
- a compare-and-set per entity znode keeping the keys it does not own (SCRAM keys in a user's
  node), then a notice ``{"version":2,"entity_path":"users/<u>/clients/<c>"}`` (``clients/<c>``,
  ``ips/<ip>``...); an entity left without keys keeps its (possibly empty) znode, as Kafka's
  AdminZkClient does.
- every broker re-reads the entity a notice names into the controller's ``_client_quotas`` and
  publishes them to its quota managers.

ACL bindings (AK ``AclAuthorizer``, ``ZkData`` ``ZkAclStore``, ``AclEntry``):
- LITERAL: ``/kafka-acl/<Topic|Group|Cluster|TransactionalId|DelegationToken|User>/<name>``,
  PREFIXED: ``/kafka-acl-extended/prefixed/<Type>/<name>``; each znode
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
  "host":"*"}]}``, deleted when its last binding goes; written by compare-and-set on its version
  (a concurrent writer on another broker makes this one re-read and retry, as AclAuthorizer does);
- then a notice per changed resource: ``/kafka-acl-changes/acl_changes_<seq>`` = ``TOPIC:<name>``
  (the resource type enum's name, ``:``, the name: LiteralAclChangeStore) or
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` = ``{"version":1,"resourceType":"TOPIC",
  "name":..,"patternType":"PREFIXED"}`` (ExtendedAclChangeEvent); every broker's authorizer
  re-reads the resources named by new notices.
Delegation tokens (AK 3.9 ``DelegationTokenManagerZk``, ``ZkData`` ``DelegationTokensZNode``,
``DelegationTokenChangeNotificationZNode``), only when ``delegation.token.secret.key`` is set:
- ``/delegation_token/tokens/<token id>`` = Kafka's token JSON (version 3: owner, tokenRequester,
  renewers sanitized, issue/max/expiry timestamps, tokenId; never the HMAC, which every broker
  derives from the id and the shared secret), created or replaced on create/renew/expire and
  deleted when a token expires or is expired;
- then a notice ``/delegation_token/token_changes/token_change_<seq>`` whose data is the token
  id; every broker re-reads the token it names (gone = removed) into its token cache, so a token
  created through one broker authenticates on all.
Handled notices older than 15 minutes are deleted, as Kafka's listeners do.

The controller (``ZkController``) owns the in-memory credentials, quotas and bindings
(cluster/controller.py ``_scram``, ``_client_quotas``, ``_acls``); this role is the only one that changes them on a
cluster: from ZooKeeper at load, after its own writes, and on notifications (events of the one
event task).
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ...acl import bindings as B
from ...quota import entities as Q
from .. import zk as Z

if TYPE_CHECKING:
    from ...security.delegation_tokens import TokenInformation
    from ..zk_controller import ZkController
    from .events import EventTask

log = logging.getLogger("pykbroker.controller")

CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_IPS = "/config/ips"
# Kafka's ConfigEntityName.Default: the znode name of a default quota entity
DEFAULT_ENTITY = "<default>"
ACL_LITERAL = "/kafka-acl"
ACL_PREFIXED = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CONFIG_CHANGE_PREFIX = "config_change_"
DT_TOKENS = "/delegation_token/tokens"
DT_CHANGES = "/delegation_token/token_changes"
DT_CHANGE_PREFIX = "token_change_"
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's changeExpirationMs of its notification listeners: handled notices older than this are
# deleted (by whichever broker handles a later change first)
NOTICE_EXPIRATION_MS = 15 * 60 * 1000

# Kafka's names in the znodes (SecurityUtils.resourceTypeName / operationName / permissionTypeName:
# the enum names in Pascal case) by pykbroker's codes (acl/bindings.py, Kafka's wire codes)
_TYPE_PATH = {B.TOPIC: "Topic", B.GROUP: "Group", B.CLUSTER: "Cluster", B.TRANSACTIONAL_ID: "TransactionalId",
              B.DELEGATION_TOKEN: "DelegationToken", B.USER: "User"}
_TYPE_BY_PATH = {v: k for k, v in _TYPE_PATH.items()}


def _pascal(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


_OP_NAME = {code: _pascal(n) for code, n in B.OPERATIONS.items()}
_OP_BY_NAME = {v.upper(): k for k, v in _OP_NAME.items()}
_PERM_NAME = {B.ALLOW: "Allow", B.DENY: "Deny"}
_PERM_BY_NAME = {"ALLOW": B.ALLOW, "DENY": B.DENY}


# ------------------------------------------------------------------ names
def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: java.net.URLEncoder (letters, digits and ``.-*_`` kept, space
    as ``+``) with ``+`` -> ``%20`` and ``*`` -> ``%2A``."""
    out = []
    for b in name.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in ".-_"):
            out.append(c)
        else:
            out.append("%%%02X" % b)
    return "".join(out)


def desanitize(name: str) -> str:
    from urllib.parse import unquote
    return unquote(name)


# ------------------------------------------------------------------ SCRAM znodes
def user_path(user: str) -> str:
    return "%s/%s" % (CONFIG_USERS, sanitize(user))


def decode_entity_config(data: Optional[bytes]) -> dict:
    if not data:
        return {}
    try:
        obj = json.loads(data)
        cfg = obj.get("config") or {}
        return {str(k): str(v) for k, v in cfg.items()}
    except (ValueError, AttributeError):
        return {}


def encode_entity_config(config: dict) -> bytes:
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


def encode_config_change(entity_path: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": entity_path}, separators=(",", ":")).encode()


# ------------------------------------------------------------------ client quota znodes
def _quota_name(name: Optional[str]) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _entity_name(znode_name: str) -> Optional[str]:
    return None if znode_name == DEFAULT_ENTITY else desanitize(znode_name)


def quota_entity_path(entity: tuple) -> str:
    """The ``entity_path`` of a notice (and, under ``/config/``, the znode) of a quota entity."""
    d = dict(entity)
    if Q.IP in d:
        return "ips/%s" % _quota_name(d[Q.IP])
    if Q.USER in d and Q.CLIENT_ID in d:
        return "users/%s/clients/%s" % (_quota_name(d[Q.USER]), _quota_name(d[Q.CLIENT_ID]))
    if Q.USER in d:
        return "users/%s" % _quota_name(d[Q.USER])
    return "clients/%s" % _quota_name(d[Q.CLIENT_ID])


def quota_entity_of(entity_path: str) -> Optional[tuple]:
    """The quota entity a notice's ``entity_path`` names (None: not a quota entity)."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[1]:
        t = {"users": Q.USER, "clients": Q.CLIENT_ID, "ips": Q.IP}.get(parts[0])
        return None if t is None else Q.canonical([(t, _entity_name(parts[1]))])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return Q.canonical([(Q.USER, _entity_name(parts[1])), (Q.CLIENT_ID, _entity_name(parts[3]))])
    return None


def _java_double(v: float) -> str:
    """Java's Double.toString, which Kafka writes for DOUBLE quota keys: plain decimal within
    [1e-3, 1e7), else the shortest digits as ``d.dddE<n>``."""
    from decimal import Decimal
    v = float(v)
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(v)
    d = Decimal(repr(v)).normalize()
    sign, digits, _ = d.as_tuple()
    rest = "".join(map(str, digits[1:])) or "0"
    return "%s%d.%sE%d" % ("-" if sign else "", digits[0], rest, d.adjusted())


def encode_quota_value(key: str, value: float) -> str:
    kind = Q.CLIENT_KEYS.get(key) or Q.IP_KEYS.get(key)
    if kind == "DOUBLE":
        return _java_double(value)
    return str(int(value + 1e-6))   # Kafka: (value + epsilon).toLong, validated whole


def quota_values(entity: tuple, cfg: dict) -> dict:
    """The quota keys of an entity's config (other keys, e.g. SCRAM, are not quotas)."""
    keys = Q.IP_KEYS if Q.IP in dict(entity) else Q.CLIENT_KEYS
    out = {}
    for k, v in cfg.items():
        if k in keys:
            try:
                out[k] = float(v)
            except ValueError:
                log.warning("quota %s=%r of %s is not a number, ignored", k, v, quota_entity_path(entity))
    return out


# ------------------------------------------------------------------ ACL znodes
def resource_path(rtype: int, name: str, pattern: int) -> str:
    root = ACL_LITERAL if pattern == B.LITERAL else ACL_PREFIXED
    return "%s/%s/%s" % (root, _TYPE_PATH[rtype], name)


def encode_acls(entries: Iterable[tuple[str, str, int, int]]) -> bytes:
    """``entries``: (principal, host, operation, permission), in a stable order."""
    # key order as Kafka 3.9.1's AclAuthorizer writes them (checked against it)
    acls = [{"principal": p, "permissionType": _PERM_NAME[perm], "host": h, "operation": _OP_NAME[op]}
            for p, h, op, perm in sorted(entries)]
    return json.dumps({"acls": acls, "version": 1}, separators=(",", ":")).encode()


def decode_acls(rtype: int, name: str, pattern: int, data: Optional[bytes]) -> set:
    if not data:
        return set()
    out = set()
    for a in json.loads(data).get("acls") or []:
        op = _OP_BY_NAME.get(str(a.get("operation", "")).upper().replace("_", ""))
        perm = _PERM_BY_NAME.get(str(a.get("permissionType", "")).upper())
        if op is None or perm is None:
            log.warning("ACL entry of %s %s not understood, ignored: %s", _TYPE_PATH[rtype], name, a)
            continue
        out.add(B.AclBinding(rtype, name, pattern, a["principal"], a["host"], op, perm))
    return out


def encode_acl_change(rtype: int, name: str, pattern: int) -> tuple[str, bytes]:
    """(the change path, the notice) for one changed resource."""
    if pattern == B.LITERAL:
        return ACL_CHANGES, ("%s:%s" % (B.RESOURCE_TYPES[rtype], name)).encode()
    return ACL_EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": B.RESOURCE_TYPES[rtype], "name": name,
                                             "patternType": B.PATTERN_TYPES[pattern]},
                                            separators=(",", ":")).encode()


def decode_acl_change(path: str, data: bytes) -> Optional[tuple]:
    try:
        if path == ACL_CHANGES:
            tname, _, name = data.decode().partition(":")
            rtype = next((c for c, n in B.RESOURCE_TYPES.items() if n == tname.upper()), None)
            return (rtype, name, B.LITERAL) if rtype is not None else None
        obj = json.loads(data)
        rtype = next((c for c, n in B.RESOURCE_TYPES.items() if n == str(obj["resourceType"]).upper()), None)
        pattern = next((c for c, n in B.PATTERN_TYPES.items() if n == str(obj["patternType"]).upper()), None)
        return (rtype, obj["name"], pattern) if rtype is not None and pattern is not None else None
    except (ValueError, KeyError, UnicodeDecodeError):
        return None


def _seq(child: str) -> int:
    try:
        return int(child.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return -1


class SecurityStore:
    def __init__(self, owner: ZkController, zk: Z.ZkSession, events: EventTask, acls_on: bool = False, tokens_on: bool = False) -> None:
        self.owner = owner     # the ZkController: its _scram and _acls are what this role changes
        # ACL znodes and their notices only with an authorizer (as Kafka: AclAuthorizer makes
        # them; without one the ACL APIs answer SECURITY_DISABLED)
        self.acls_on = acls_on
        # the token znodes only with delegation.token.secret.key (Kafka's tokenAuthEnabled)
        self.tokens_on = tokens_on
        self.zk = zk
        self.events = events
        # the last notice handled per change path (Kafka's lastExecutedChange)
        self._last: dict[str, int] = {}

    # ------------------------------------------------------------------ load and watch
    async def load(self) -> None:
        """Every credential and binding stored (before the listeners start), and the notices
        that exist now counted as handled."""
        await self.zk.call("ensure_path", CONFIG_USERS)
        if self.acls_on:
            # what Kafka's AclAuthorizer creates at start-up: both roots with a child per
            # resource type, and the two change paths
            for root in (ACL_LITERAL, ACL_PREFIXED):
                for tname in _TYPE_PATH.values():
                    await self.zk.call("ensure_path", "%s/%s" % (root, tname))
            for path in (ACL_CHANGES, ACL_EXTENDED_CHANGES):
                await self.zk.call("ensure_path", path)
        followed = [(Z.CONFIG_CHANGES, CONFIG_CHANGE_PREFIX)]
        if self.tokens_on:
            for path in (DT_TOKENS, DT_CHANGES):
                await self.zk.call("ensure_path", path)
            followed.append((DT_CHANGES, DT_CHANGE_PREFIX))
        if self.acls_on:
            followed += [(ACL_CHANGES, ACL_CHANGE_PREFIX), (ACL_EXTENDED_CHANGES, ACL_CHANGE_PREFIX)]
        for path, prefix in followed:
            children = await self.zk.call("get_children", path)
            self._last[path] = max([_seq(c) for c in children if c.startswith(prefix)], default=-1)
        scram = {}
        for child in await self.zk.call("get_children", CONFIG_USERS):
            creds = await self._read_user_scram(desanitize(child))
            if creds:
                scram[desanitize(child)] = creds
        self.owner._scram = scram
        await self._load_quotas()
        if self.tokens_on:
            tokens = {}
            for token_id in await self.zk.call("get_children", DT_TOKENS):
                info = await self._read_token(token_id)
                if info is not None:
                    tokens[token_id] = info
            self.owner._tokens = tokens
            self.owner._publish_tokens(upserts=list(tokens.values()))
        if not self.acls_on:
            return
        acls = set()
        for root, pattern in ((ACL_LITERAL, B.LITERAL), (ACL_PREFIXED, B.PREFIXED)):
            if not await self.zk.call("exists", root):
                continue
            for tname in await self.zk.call("get_children", root):
                rtype = _TYPE_BY_PATH.get(tname)
                if rtype is None:
                    continue
                for name in await self.zk.call("get_children", "%s/%s" % (root, tname)):
                    acls |= await self._read_resource(rtype, name, pattern)
        if acls:
            self.owner._store_acls(acls, ())
            self.owner._publish_acls(added=sorted(acls))

    async def _load_quotas(self) -> None:
        """Every client quota entity stored (Kafka's DynamicConfigManager start-up read)."""
        entities = []
        for root, t in ((CONFIG_USERS, Q.USER), (CONFIG_CLIENTS, Q.CLIENT_ID), (CONFIG_IPS, Q.IP)):
            await self.zk.call("ensure_path", root)
            for child in await self.zk.call("get_children", root):
                entities.append(Q.canonical([(t, _entity_name(child))]))
                if t != Q.USER:
                    continue
                sub = "%s/%s/clients" % (root, child)
                if await self.zk.call("exists", sub):
                    for c in await self.zk.call("get_children", sub):
                        entities.append(Q.canonical([(Q.USER, _entity_name(child)), (Q.CLIENT_ID, _entity_name(c))]))
        quotas = {}
        for entity in entities:
            values = quota_values(entity, decode_entity_config(await self._get("/config/" + quota_entity_path(entity))))
            if values:
                quotas[entity] = values
        self.owner._client_quotas = quotas
        self.owner._publish_client_quotas()

    def watch(self) -> None:
        post = self.events.post
        self.zk.children_watch(Z.CONFIG_CHANGES, lambda ch: post(("security_changes", Z.CONFIG_CHANGES, ch)))
        if self.tokens_on:
            self.zk.children_watch(DT_CHANGES, lambda ch: post(("security_changes", DT_CHANGES, ch)))
        if not self.acls_on:
            return
        self.zk.children_watch(ACL_CHANGES, lambda ch: post(("security_changes", ACL_CHANGES, ch)))
        self.zk.children_watch(ACL_EXTENDED_CHANGES, lambda ch: post(("security_changes", ACL_EXTENDED_CHANGES, ch)))

    async def on_changes(self, path: str, children: list) -> None:
        """New notices under ``path``: re-read what they name, in sequence order."""
        prefix = {Z.CONFIG_CHANGES: CONFIG_CHANGE_PREFIX, DT_CHANGES: DT_CHANGE_PREFIX}.get(path, ACL_CHANGE_PREFIX)
        last = self._last.get(path, -1)
        new = sorted((s, c) for c in children if c.startswith(prefix) and (s := _seq(c)) > last)
        for seq, child in new:
            data = await self._get("%s/%s" % (path, child))
            self._last[path] = seq
            if data is None:
                continue
            if path == DT_CHANGES:
                await self.refresh_token(data.decode("utf-8", "replace"))
            elif path == Z.CONFIG_CHANGES:
                try:
                    entity = json.loads(data).get("entity_path", "")
                except ValueError:
                    continue
                kind, _, name = entity.partition("/")
                if kind == "users" and name and "/" not in name:
                    await self.refresh_user(desanitize(name))
                quota_entity = quota_entity_of(entity)
                if quota_entity is not None:
                    await self.refresh_quota(quota_entity)
            else:
                res = decode_acl_change(path, data)
                if res is None:
                    log.warning("ACL change notice %s/%s not understood, ignored", path, child)
                    continue
                await self.refresh_resource(*res)
        await self._purge(path, prefix, children)

    async def _purge(self, path: str, prefix: str, children: list) -> None:
        """Kafka's ZkNodeChangeNotificationListener.purgeObsoleteNotifications: handled notices
        older than 15 minutes are deleted (in sequence order, up to the first younger one), so the
        change paths do not grow forever; every broker does it, a notice already gone is fine."""
        import time

        from kazoo.exceptions import NoNodeError
        last = self._last.get(path, -1)
        cutoff_ms = time.time() * 1000 - NOTICE_EXPIRATION_MS
        for seq, child in sorted((_seq(c), c) for c in children if c.startswith(prefix)):
            if seq > last:
                break
            try:
                stat = await self.zk.call("exists", "%s/%s" % (path, child))
                if stat is None:
                    continue
                if stat.ctime >= cutoff_ms:
                    break
                await self.zk.call("delete", "%s/%s" % (path, child))
            except NoNodeError:
                continue

    async def _get(self, path: str) -> Optional[bytes]:
        from kazoo.exceptions import NoNodeError
        try:
            data, _stat = await self.zk.call("get", path)
            return data
        except NoNodeError:
            return None

    async def _read_user_scram(self, user: str) -> dict:
        cfg = decode_entity_config(await self._get(user_path(user)))
        return {m: cfg[m] for m in SCRAM_KEYS if m in cfg}

    async def refresh_user(self, user: str) -> None:
        creds = await self._read_user_scram(user)
        if creds:
            self.owner._scram[user] = creds
        else:
            self.owner._scram.pop(user, None)

    async def refresh_quota(self, entity: tuple) -> None:
        """Re-read one quota entity; its managers told only if it changed."""
        values = quota_values(entity, decode_entity_config(await self._get("/config/" + quota_entity_path(entity))))
        quotas = self.owner._client_quotas
        if quotas.get(entity, {}) == values:
            return
        quotas = dict(quotas)
        if values:
            quotas[entity] = values
        else:
            quotas.pop(entity, None)
        self.owner._client_quotas = quotas
        self.owner._publish_client_quotas()

    async def _read_resource(self, rtype: int, name: str, pattern: int) -> set:
        data = await self._get(resource_path(rtype, name, pattern))
        try:
            return decode_acls(rtype, name, pattern, data)
        except ValueError:
            log.warning("ACL znode %s is not valid JSON, ignored", resource_path(rtype, name, pattern))
            return set()

    async def refresh_resource(self, rtype: int, name: str, pattern: int) -> None:
        now = await self._read_resource(rtype, name, pattern)
        had = {b for b in self.owner._acls if (b.resource_type, b.name, b.pattern_type) == (rtype, name, pattern)}
        add, rem = self.owner._store_acls(now - had, had - now)
        if add or rem:
            self.owner._publish_acls(add, rem)

    async def _read_token(self, token_id: str) -> Optional[TokenInformation]:
        from ...security.delegation_tokens import TokenInformation
        data = await self._get("%s/%s" % (DT_TOKENS, token_id))
        if not data:
            return None
        try:
            return TokenInformation.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as e:
            log.warning("delegation token znode %s not understood, ignored: %s", token_id, e)
            return None

    async def refresh_token(self, token_id: str) -> None:
        """Kafka's TokenChangedNotificationHandler: re-read one token (gone = removed)."""
        if "/" in token_id or not token_id:
            return
        info = await self._read_token(token_id)
        if info is None:
            if token_id in self.owner._tokens:
                self.owner._store_tokens(removals=[token_id])
                self.owner._publish_tokens(removals=[token_id])
        elif self.owner._tokens.get(token_id) != info:
            self.owner._store_tokens(upserts=[info])
            self.owner._publish_tokens(upserts=[info])

    # ------------------------------------------------------------------ writes
    async def alter_delegation_tokens(self, upserts: Iterable[TokenInformation] = (),
                                      removals: Iterable[str] = ()) -> None:
        """Per token: its znode created, replaced or deleted together with a change notice
        naming it (one transaction), then this broker's cache refreshed from ZooKeeper."""
        from kazoo.exceptions import NodeExistsError, NoNodeError
        for info in upserts:
            path = "%s/%s" % (DT_TOKENS, info.token_id)
            data = json.dumps(info.to_json(), separators=(",", ":")).encode()
            while True:
                t = self.zk.client.transaction()
                if await self.zk.call("exists", path) is None:
                    t.create(path, data)
                else:
                    t.set_data(path, data)
                t.create("%s/%s" % (DT_CHANGES, DT_CHANGE_PREFIX), info.token_id.encode(), sequence=True)
                results = await self.zk.run(t.commit)
                if any(isinstance(r, (NodeExistsError, NoNodeError)) for r in results):
                    continue   # created or deleted meanwhile through another broker: again
                _raise_first(results)
                break
            await self.refresh_token(info.token_id)
        for token_id in removals:
            t = self.zk.client.transaction()
            t.delete("%s/%s" % (DT_TOKENS, token_id))
            t.create("%s/%s" % (DT_CHANGES, DT_CHANGE_PREFIX), token_id.encode(), sequence=True)
            results = await self.zk.run(t.commit)
            if not any(isinstance(r, NoNodeError) for r in results):   # gone already: fine
                _raise_first(results)
            await self.refresh_token(token_id)

    async def _change_entity_config(self, entity_path: str, apply: Callable[[dict], Any]) -> None:
        """Kafka's AdminZkClient.changeConfigs for one config entity (``users/alice``,
        ``clients/app``, ...): ``apply(cfg)`` edits the znode's config map in place (keys it does
        not own kept), written with a compare-and-set together with one change notice; a write
        through another broker meanwhile makes it re-read and apply again."""
        path = "/config/" + entity_path

        def build(t: Any, data: Optional[bytes], version: Optional[int]) -> bool:
            cfg = decode_entity_config(data)
            apply(cfg)
            if version is None:
                t.create(path, encode_entity_config(cfg))
            else:
                t.set_data(path, encode_entity_config(cfg), version=version)
            t.create(Z.CONFIG_CHANGE_PREFIX, encode_config_change(entity_path), sequence=True)
            return True
        await self._compare_and_set(path, build)

    async def _compare_and_set(self, path: str, build: Callable[[Any, Optional[bytes], Optional[int]], bool]) -> None:
        """Kafka's optimistic znode update: read ``path`` (data and version; None, None when
        absent), ``build(transaction, data, version)`` adds the writes (False: nothing to
        write), commit; a write through another broker meanwhile (the version moved, the node
        was created, deleted or filled) makes it read and build again."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
        await self.zk.call("ensure_path", path.rsplit("/", 1)[0])
        while True:
            try:
                data, stat = await self.zk.call("get", path)
                version = stat.version
            except NoNodeError:
                data, version = None, None
            t = self.zk.client.transaction()
            if not build(t, data, version):
                return
            results = await self.zk.run(t.commit)
            if any(isinstance(r, (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)) for r in results):
                continue   # written meanwhile through another broker: re-read and build again
            _raise_first(results)
            return

    async def alter_scram_credentials(self, changes: list) -> None:
        """``[(user, mechanism, text or None)]``: per user a compare-and-set of its config
        entity (other keys, e.g. quotas, kept) and one change notice."""
        by_user: dict[str, list] = {}
        for user, mech, text in changes:
            by_user.setdefault(user, []).append((mech, text))
        for user, items in by_user.items():
            def apply(cfg: dict, items: Any = items) -> None:
                for mech, text in items:
                    if text is None:
                        cfg.pop(mech, None)
                    else:
                        cfg[mech] = text
            await self._change_entity_config("users/%s" % sanitize(user), apply)
            await self.refresh_user(user)
        log.info("SCRAM credentials changed: %s", ", ".join(
            "%s %s %s" % ("deleted" if t is None else "set", m, u) for u, m, t in changes))

    async def alter_client_quotas(self, changes: dict) -> None:
        """``{entity: {key: value or None}}`` (validated by the caller): per entity a
        compare-and-set of its znode (keys it does not own kept) and one change notice, as
        Kafka's AdminZkClient.changeConfigs."""
        for entity, delta in changes.items():
            def apply(cfg: dict, delta: Any = delta) -> None:
                for key, value in delta.items():
                    if value is None:
                        cfg.pop(key, None)
                    else:
                        cfg[key] = encode_quota_value(key, value)
            await self._change_entity_config(quota_entity_path(entity), apply)
            await self.refresh_quota(entity)
        log.info("client quotas changed: %s", changes)

    async def alter_acls(self, added: Iterable[B.AclBinding] = (), removed: Iterable[B.AclBinding] = ()) -> None:
        """Per resource pattern touched: a compare-and-set of its znode (deleted when empty) and
        its change notice, each resource in one transaction."""
        touched: dict[tuple, tuple[list, list]] = {}
        for b in added:
            touched.setdefault((b.resource_type, b.name, b.pattern_type), ([], []))[0].append(b)
        for b in removed:
            touched.setdefault((b.resource_type, b.name, b.pattern_type), ([], []))[1].append(b)
        for (rtype, name, pattern), (add, rem) in touched.items():
            path = resource_path(rtype, name, pattern)

            def build(t: Any, data: Optional[bytes], version: Optional[int], path: str = path, rtype: Any = rtype,
                      name: str = name, pattern: Any = pattern, add: Any = add, rem: Any = rem) -> bool:
                now = decode_acls(rtype, name, pattern, data)
                want = (now - set(rem)) | set(add)
                if (want == now and version is not None) or (not want and version is None):
                    return False
                entries = [(b.principal, b.host, b.operation, b.permission) for b in want]
                if version is None:
                    t.create(path, encode_acls(entries))
                elif want:
                    t.set_data(path, encode_acls(entries), version=version)
                else:
                    t.delete(path, version=version)
                change_path, notice = encode_acl_change(rtype, name, pattern)
                t.create("%s/%s" % (change_path, ACL_CHANGE_PREFIX), notice, sequence=True)
                return True
            await self._compare_and_set(path, build)
            await self.refresh_resource(rtype, name, pattern)
        for b in added:
            log.info("ACL added: %s", b.to_json())
        for b in removed:
            log.info("ACL removed: %s", b.to_json())


def _raise_first(results: list) -> None:
    for r in results:
        if isinstance(r, Exception):
            raise r
