"""The data-directory lock: one broker process per log dir, as Kafka's ``.lock``.

Two brokers writing the same log dir interleave appends, truncate each other's segments and
overwrite each other's checkpoints: acknowledged records are lost.  Kafka's LogManager takes an
exclusive lock on ``<dir>/.lock`` in every log dir before it reads anything and holds it for the
life of the process; a second process refuses to start.  pykbroker does the same with
``flock(LOCK_EX | LOCK_NB)``:

- the lock belongs to the open file description, so it is released when the process dies in
  any way (``kill -9`` included): there is no stale lock to clean up after a crash;
- it is taken on a fresh open, so a second ``Broker`` in the *same* process is refused too
  (two in-process brokers on one dir lose data the same way), while an in-process
  ``crash()``/``restart()`` releases it before the next incarnation takes it;
- the holder writes its pid into the file, only so the refusal can name it (Kafka's file is
  empty; the pid is a courtesy, never used to decide anything).

The lock goes through ``os`` directly, not the storage fault seam (``storage/fs.py``): it is
about processes, not about the durability of data.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import Optional

LOCK_FILE = ".lock"   # Kafka's name (LogManager.LockFileName)


class LogDirInUseError(RuntimeError):
    """Another broker (another process, or another broker in this one) holds the dir's lock."""

    def __init__(self, log_dir: str, holder_pid: Optional[int]) -> None:
        self.log_dir = log_dir
        self.holder_pid = holder_pid
        who = "another broker (pid %d)" % holder_pid if holder_pid else "another broker"
        super().__init__("log dir %s is in use by %s: its %s is locked; one broker per data "
                         "directory" % (log_dir, who, LOCK_FILE))


class LogDirLock:
    """The exclusive lock of one log dir, held until :meth:`release`."""

    def __init__(self, log_dir: str, fd: int) -> None:
        self.log_dir = log_dir
        self._fd: Optional[int] = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            # closing the descriptor drops the flock; the file stays (as Kafka's does)
            os.close(fd)


def _holder_pid(path: str) -> Optional[int]:
    try:
        with open(path, "rb") as fh:
            text = fh.read(32).strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def lock_log_dir(log_dir: str) -> LogDirLock:
    """Create ``log_dir`` if needed and lock it; :class:`LogDirInUseError` if it is held.
    Other OSErrors (a path that is a file, no permission) propagate unchanged."""
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LogDirInUseError(log_dir, _holder_pid(path)) from None
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    except OSError:
        pass   # the pid is only for the refusal's message (a full disk must not stop the start)
    return LogDirLock(log_dir, fd)


def lock_log_dirs(log_dirs: list[str]) -> list[LogDirLock]:
    """Every dir locked, or none: on a refusal the locks already taken are released."""
    locks: list[LogDirLock] = []
    try:
        for d in log_dirs:
            locks.append(lock_log_dir(d))
    except BaseException:
        for lk in locks:
            lk.release()
        raise
    return locks
