"""What every back-end of the embedded broker shares: :class:`BrokerFront` (the bootstrap
string, the context manager, the temporary log dir, waiting for a group),
:class:`SecurableFront` (with the client settings of a broker started with ``security=...``)
and :data:`TEST_CONFIG`."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any, Optional, TypeGuard

from .introspection import GroupDescription

# What the pytest plugin starts its broker with (documented there and in the README): a group's
# first join answers at once instead of after Kafka's 3 s delay; small segments and a small
# __consumer_offsets keep the data dir and the first group request cheap.
TEST_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": str(1 << 20),
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": str(1 << 20),
}


class BrokerFront:
    """What every variant shares: the bootstrap string, the context manager, the temporary log
    dir, and waiting for a group (by polling :meth:`group`)."""

    host = "127.0.0.1"
    port = 0

    advertised_host: Optional[str] = None   # where a wildcard bind (0.0.0.0) is reached (loopback)
    log_dir: Optional[str]   # the broker's data dir (None: not known, or not yet made)

    @property
    def bootstrap_servers(self) -> str:
        return "%s:%d" % (self.advertised_host or self.host, self.port)

    # BrokerProcess and pykbroker.protocol.wire read ``bootstrap``
    bootstrap = bootstrap_servers

    def _own_log_dir(self, log_dir: Optional[str | os.PathLike[str]]) -> None:
        self._tmp = None
        if log_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="pykbroker-")
            log_dir = self._tmp
        self.log_dir = os.path.abspath(str(log_dir))

    def _remove_tmp(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def start(self, timeout: float = 30.0) -> "BrokerFront":
        raise NotImplementedError

    def stop(self, timeout: float = 30.0) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:   # the subclass's start() returns self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def group(self, group_id: str) -> Optional[GroupDescription]:
        raise NotImplementedError

    @staticmethod
    def _is_stable(g: Optional[GroupDescription], members: Optional[int]) -> TypeGuard[GroupDescription]:
        return g is not None and g.state == "Stable" and (members is None or len(g.members) == members)

    def wait_for_group_stable(self, group_id: str, members: Optional[int] = None,
                              timeout: float = 30.0) -> GroupDescription:
        """Until the group is Stable (with ``members`` members when given); its description.
        Raises TimeoutError with the last state seen."""
        deadline = time.monotonic() + timeout
        while True:
            g = self.group(group_id)
            if self._is_stable(g, members):
                return g
            if time.monotonic() > deadline:
                raise TimeoutError("group %r not stable%s after %ss: %r" % (
                    group_id, "" if members is None else " with %d members" % members, timeout, g))
            time.sleep(0.02)



class SecurableFront(BrokerFront):
    """The front of the in-process and the subprocess broker: :class:`BrokerFront`, with what
    they take from
    ``security=`` / ``users=`` / ``mechanisms=`` and ``as_kafka=``.  With ``security`` SSL,
    SASL_PLAINTEXT or SASL_SSL: a throw-away CA and server certificate, the users (PLAIN and
    SCRAM), and :meth:`client_config` (pykbroker/local/secure_setup.py)."""

    _secure = None

    def _init_security(self, security: Optional[str], users: Optional[dict], mechanisms: Optional[list],
                       host: str, as_kafka: Optional[str]) -> None:
        self._secure = None
        if security is not None and str(security).upper() != "PLAINTEXT":
            from ..local.secure_setup import SecureSetup
            self._secure = SecureSetup(security, users, mechanisms, host)
        # a version profile (pykbroker/profiles.py): "2.8", "3.9", "4.0", "4.4"/"4.x"; None: all
        self.as_kafka = None
        if as_kafka is not None:
            from ..profiles import profile_name
            self.as_kafka = profile_name(as_kafka)

    def client_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                      password: Optional[str] = None) -> dict:
        """confluent-kafka settings reaching this broker as ``user`` (default: the first user)
        with ``mechanism`` (default: the first enabled); ``password`` overrides the user's."""
        if self._secure is None:
            return {"bootstrap.servers": self.bootstrap_servers}
        return self._secure.client_config(self.bootstrap_servers, user, mechanism, password)

    def java_properties_file(self, path: str, user: Optional[str] = None, mechanism: Optional[str] = None,
                             password: Optional[str] = None) -> str:
        """Writes the Java client settings (``--command-config`` / ``Properties.load`` form,
        truststore as PEM) to ``path`` and returns it."""
        props = ({"bootstrap.servers": self.bootstrap_servers} if self._secure is None else
                 self._secure.java_properties(self.bootstrap_servers, user, mechanism, password))
        with open(path, "w") as fh:
            for k, v in props.items():
                # java.util.Properties escaping of the value's backslashes
                fh.write("%s=%s\n" % (k, str(v).replace("\\", "\\\\")))
        return path

    def kafka_python_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                            password: Optional[str] = None) -> dict:
        """The same as kafka-python keyword arguments."""
        if self._secure is None:
            return {"bootstrap_servers": self.bootstrap_servers}
        return self._secure.kafka_python_config(self.bootstrap_servers, user, mechanism, password)

    def aiokafka_config(self, user: Optional[str] = None, mechanism: Optional[str] = None,
                        password: Optional[str] = None) -> dict:
        """The same as aiokafka keyword arguments (with an ``ssl_context``)."""
        if self._secure is None:
            return {"bootstrap_servers": self.bootstrap_servers}
        return self._secure.aiokafka_config(self.bootstrap_servers, user, mechanism, password)
