"""A fault-injecting :class:`~pykbroker.storage.fs.FileSystem` for durability tests.

``FaultFS(root)`` works on the real files under ``root`` (file descriptors stay real, so
``os.sendfile`` and the in-process broker keep working) and additionally keeps, per file, the
image a disk would still hold after a power cut:

* file *content* becomes durable only through ``fsync`` of that file: every ``pwrite`` /
  ``ftruncate`` since the last fsync is pending;
* *names* (create, rename, unlink, mkdir) become durable only through ``fsync_dir`` of the
  directory holding them, as POSIX says (ext4/xfs usually persist them sooner; tests assume the
  worst).  A directory created later than the last fsync of its parent vanishes with everything
  in it.

Faults:

* :meth:`crash` freezes the file system (every later call fails with EIO, like a machine whose
  power is gone) — the writer may still try to shut down, nothing it does reaches the disk;
  :meth:`restart` then rewrites ``root`` from the durable image (``unsynced="drop"``), keeps
  every pending write (``"keep"``, a process crash), keeps the file sizes but zero-fills what was
  not synced (``"zero"``, delayed allocation), and may tear the last write of chosen files
  (``tear={path: bytes_kept}``).  :meth:`power_loss` is crash + restart.
* at rest: :meth:`flip_bits`, :meth:`zero_tail`, :meth:`truncate_tail`, :meth:`write_garbage`,
  :meth:`delete` (files are changed on disk and in the durable image alike).
* online errors: :meth:`fail` adds a rule — an errno (ENOSPC, EIO, EROFS, EACCES, ...) raised by
  chosen operations on paths under a prefix, optionally only after N matching calls, optionally
  once; ENOSPC writes may first write a prefix (``partial``).  :meth:`read_only` is the rule for
  a directory that became read-only (every mutation fails, reads work).

Whole-file atomic writes (:meth:`FileSystem.write_file_atomic`, used for checkpoints, the
producer id block and meta.properties) are made of the operations above (create/open_write,
pwrite, fsync, rename, fsync_dir), so every rule and crash point applies inside them too.

Counters (``writes``, ``fsyncs``, ``dir_fsyncs``) let tests choose an injection point.
Test-only: the durable image is kept in memory.
"""
from __future__ import annotations

import errno as _errno
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from .fs import FileSystem

__all__ = ["FaultFS", "FaultRule", "WRITE_OPS", "MUTATING_OPS"]

WRITE_OPS = frozenset({"pwrite"})
MUTATING_OPS = frozenset({"pwrite", "ftruncate", "fsync", "fsync_dir", "syncfs", "create", "open_write",
                          "rename", "remove", "makedirs", "rmtree"})


@dataclass
class FaultRule:
    errno: int
    ops: frozenset
    under: Optional[str] = None      # path prefix (None = anywhere)
    after: int = 0                   # let this many matching calls pass first
    once: bool = False
    partial: int = 0                 # pwrite: bytes written before the error
    hits: int = 0                    # matching calls seen
    fired: int = 0

    def matches(self, op: str, path: Optional[str]) -> bool:
        if op not in self.ops:
            return False
        if self.under is not None and (path is None or not (path == self.under or path.startswith(self.under + os.sep))):
            return False
        return True


class _Inode:
    """One file: durable content plus the writes not yet fsynced."""
    __slots__ = ("durable", "pending", "is_dir")

    def __init__(self, durable: bytes = b"", is_dir: bool = False) -> None:
        self.durable = bytearray(durable)
        self.pending: list[tuple] = []   # ("w", pos, bytes) | ("t", size)
        self.is_dir = is_dir

    def apply(self, ops: list[tuple], tear_last: Optional[int] = None, zero: bool = False) -> bytearray:
        data = bytearray(self.durable)
        last_w = max((i for i, o in enumerate(ops) if o[0] == "w"), default=-1)
        for i, o in enumerate(ops):
            if o[0] == "t":
                del data[o[1]:]
                if len(data) < o[1]:
                    data.extend(bytes(o[1] - len(data)))
            else:
                pos, b = o[1], o[2]
                if i == last_w and tear_last is not None:
                    b = b[:tear_last]
                if zero:
                    b = bytes(len(b))
                if len(data) < pos:
                    data.extend(bytes(pos - len(data)))
                data[pos:pos + len(b)] = b
        return data

    def sync(self) -> None:
        if self.pending:
            self.durable = self.apply(self.pending)
            self.pending = []


class FaultFS(FileSystem):
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self._lock = threading.RLock()
        # current namespace: path -> inode (files and dirs under root, root itself included)
        self._cur: dict[str, _Inode] = {}
        # durable namespace: dir path -> {name: inode}; only dirs whose entries were fsynced
        self._dur: dict[str, dict[str, _Inode]] = {}
        self._fds: dict[int, tuple[_Inode, str]] = {}
        self._seen: set[str] = set()     # every path ever opened/created through us
        self._dead_fds: set[int] = set()
        self.rules: list[FaultRule] = []
        self.crashed = False
        self.writes = 0
        self.fsyncs = 0
        self.dir_fsyncs = 0
        self.crash_at_write: Optional[int] = None   # see crash_after_writes
        self.crash_tear: Optional[int] = None
        self._adopt_tree()

    # ------------------------------------------------------------------ bookkeeping
    def _adopt_tree(self) -> None:
        """Everything already under root counts as durable (written before tracking)."""
        self._cur.clear()
        self._dur.clear()
        for dirpath, dirnames, filenames in os.walk(self.root):
            node = self._cur.get(dirpath) or _Inode(is_dir=True)
            self._cur[dirpath] = node
            entries = {}
            for n in dirnames:
                p = os.path.join(dirpath, n)
                child = _Inode(is_dir=True)
                self._cur[p] = child
                entries[n] = child
            for n in filenames:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as fh:
                    child = _Inode(fh.read())
                self._cur[p] = child
                entries[n] = child
            self._dur[dirpath] = entries

    def _known(self, path: str) -> bool:
        """Was ``path`` ever seen by this file system (durably or not)?"""
        return any(os.path.basename(path) in e for d, e in self._dur.items()
                   if d == os.path.dirname(path)) or path in self._seen

    def _tracked(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _check_tracked(self, op: str, path: str) -> bool:
        """Whether ``path`` is under ``root`` (else the plain file system serves the call),
        after the fault rules for ``op`` on it, when it is."""
        if self._tracked(path):
            self._check(op, path)
            return True
        return False

    def _norm(self, path: str) -> str:
        return os.path.abspath(path)

    def _check(self, op: str, path: Optional[str], data_len: int = 0) -> int:
        """Raise a configured error; returns bytes to write before raising (partial ENOSPC)."""
        if self.crashed:
            raise OSError(_errno.EIO, "I/O error (power is off)", path)
        for r in self.rules:
            if not r.matches(op, path):
                continue
            r.hits += 1
            if r.hits <= r.after or (r.once and r.fired):
                continue
            r.fired += 1
            if op == "pwrite" and r.partial:
                return min(r.partial, data_len)
            raise OSError(r.errno, os.strerror(r.errno), path)
        return -1

    def _node_for_fd(self, fd: int) -> tuple[Optional[_Inode], Optional[str]]:
        if fd in self._dead_fds:
            raise OSError(_errno.EIO, "stale file handle from before the crash")
        return self._fds.get(fd, (None, None))

    # ------------------------------------------------------------------ fault control
    def fail(self, err: int, ops: Iterable[str] = WRITE_OPS, under: Optional[str] = None,
             after: int = 0, once: bool = False, partial: int = 0) -> FaultRule:
        r = FaultRule(err, frozenset(ops), self._norm(under) if under else None, after, once, partial)
        self.rules.append(r)
        return r

    def read_only(self, under: str, err: int = _errno.EROFS) -> FaultRule:
        return self.fail(err, MUTATING_OPS, under)

    def crash_after_writes(self, n: int, tear: Optional[int] = None) -> None:
        """The power goes during write number ``n + 1`` from now (counting every pwrite
        under root): that write gets ``tear`` bytes onto the page cache (None: none of it) and
        fails with EIO, and the file system is crashed."""
        self.crash_at_write = self.writes + n + 1
        self.crash_tear = tear

    def clear_faults(self) -> None:
        self.rules.clear()

    def crash(self) -> None:
        """The power goes: from now on every call fails with EIO."""
        with self._lock:
            self.crashed = True

    def restart(self, unsynced: str = "drop", tear: Optional[dict] = None) -> dict:
        """Rewrite ``root`` as the disk would be after reboot.  Returns per-file byte counts
        {path: (bytes before, bytes after)} of the regular files that changed."""
        assert unsynced in ("drop", "keep", "zero")
        tear = {self._norm(p): n for p, n in (tear or {}).items()}
        with self._lock:
            self.crashed = True
            before = {p: os.path.getsize(p) for p, n in self._cur.items()
                      if not n.is_dir and os.path.exists(p)}
            # which namespace survives
            if unsynced == "keep":
                ns = self._current_entries()
            else:
                ns = self._dur
            image: dict[str, Optional[bytes]] = {}   # path -> content (None = directory)
            memo: dict[int, bytes] = {}

            def content(node: _Inode, path: str) -> bytes:
                if id(node) not in memo:
                    if unsynced == "drop" and path not in tear:
                        memo[id(node)] = bytes(node.durable)
                    elif unsynced == "zero":
                        memo[id(node)] = bytes(node.apply(node.pending, tear.get(path), zero=True))
                    else:
                        memo[id(node)] = bytes(node.apply(node.pending, tear.get(path)))
                return memo[id(node)]

            def walk(dirpath: str) -> None:
                image[dirpath] = None
                for name, node in ns.get(dirpath, {}).items():
                    p = os.path.join(dirpath, name)
                    if node.is_dir:
                        walk(p)
                    else:
                        image[p] = content(node, p)
                # directories made behind our back (os.makedirs by the broker) are not
                # modelled: they survive, and what the storage layer made inside them is
                # judged by the model
                if os.path.isdir(dirpath):
                    for name in os.listdir(dirpath):
                        p = os.path.join(dirpath, name)
                        if p not in image and p not in self._cur and os.path.isdir(p) and not self._known(p):
                            walk(p)

            walk(self.root)
            # files the storage layer never touched (broker metadata written with os.* and
            # its own fsyncs) are not modelled: they survive as they are
            for dirpath, _, filenames in os.walk(self.root):
                for n in filenames:
                    p = os.path.join(dirpath, n)
                    if p not in self._cur and p not in image and not self._known(p):
                        with open(p, "rb") as fh:
                            image[p] = fh.read()
                        d = dirpath
                        while d not in image and self._tracked(d):
                            image[d] = None
                            d = os.path.dirname(d)
            # the old descriptors point at inodes that are gone: keep them open (their owners
            # close them later) but refuse any use
            self._dead_fds |= set(self._fds)
            self._fds.clear()
            # rebuild the tree on the real disk
            for entry in os.listdir(self.root):
                p = os.path.join(self.root, entry)
                if os.path.isdir(p) and not os.path.islink(p):
                    import shutil
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            for p in sorted(image):
                data = image[p]
                if data is None:
                    os.makedirs(p, exist_ok=True)
                else:
                    with open(p, "wb") as out:
                        out.write(data)
            self._adopt_tree()
            self.crashed = False
            self.crash_at_write = None
            after = {p: os.path.getsize(p) for p in image if image[p] is not None}
            changes = {}
            for p in set(before) | set(after):
                b, a = before.get(p, 0), after.get(p, 0)
                if b != a:
                    changes[p] = (b, a)
            return changes

    def power_loss(self, unsynced: str = "drop", tear: Optional[dict] = None) -> dict:
        self.crash()
        return self.restart(unsynced, tear)

    def _current_entries(self) -> dict[str, dict[str, _Inode]]:
        ns: dict[str, dict[str, _Inode]] = {}
        for p, node in self._cur.items():
            if p == self.root:
                continue
            ns.setdefault(os.path.dirname(p), {})[os.path.basename(p)] = node
        return ns

    # at-rest damage: the disk and the durable image change alike ---------------------------
    def _rewrite_at_rest(self, path: str, fn: Callable[[bytearray], bytearray]) -> None:
        path = self._norm(path)
        with self._lock:
            with open(path, "rb") as fh:
                data = bytearray(fh.read())
            data = fn(data)
            with open(path, "r+b") as fh:
                fh.write(data)
                fh.truncate(len(data))
            node = self._cur.get(path)
            if node is not None:
                node.pending = []
                node.durable = bytearray(data)

    def flip_bits(self, path: str, offsets: Iterable[int], mask: int = 0x01) -> None:
        def fn(d: bytearray) -> bytearray:
            for o in offsets:
                d[o] ^= mask
            return d
        self._rewrite_at_rest(path, fn)

    def zero_tail(self, path: str, nbytes: int) -> None:
        def fn(d: bytearray) -> bytearray:
            n = min(nbytes, len(d))
            d[len(d) - n:] = bytes(n)
            return d
        self._rewrite_at_rest(path, fn)

    def truncate_tail(self, path: str, nbytes: int) -> None:
        self._rewrite_at_rest(path, lambda d: d[:max(0, len(d) - nbytes)])

    def write_garbage(self, path: str, data: bytes) -> None:
        path = self._norm(path)
        if not os.path.exists(path):
            with open(path, "wb"):
                pass
            with self._lock:
                node = _Inode()
                self._cur[path] = node
                self._dur.setdefault(os.path.dirname(path), {})[os.path.basename(path)] = node
        self._rewrite_at_rest(path, lambda d: bytearray(data))

    def delete(self, path: str) -> None:
        path = self._norm(path)
        with self._lock:
            os.unlink(path)
            self._cur.pop(path, None)
            self._dur.get(os.path.dirname(path), {}).pop(os.path.basename(path), None)

    def durable_content(self, path: str) -> Optional[bytes]:
        """What a power cut right now would leave in ``path`` (None: the file would vanish)."""
        path = self._norm(path)
        with self._lock:
            d = os.path.dirname(path)
            node = self._dur.get(d, {}).get(os.path.basename(path))
            # the file's directory must itself survive
            while d != self.root and node is not None:
                parent = os.path.dirname(d)
                if os.path.basename(d) not in self._dur.get(parent, {}):
                    return None
                d = parent
            return None if node is None else bytes(node.durable)

    # ------------------------------------------------------------------ FileSystem
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = self._norm(path)
        tracked = self._tracked(path)
        writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        with self._lock:
            exists = os.path.exists(path)
            if tracked or self.crashed:
                if writing and not exists and flags & os.O_CREAT:
                    self._check("create", path)
                elif writing:
                    self._check("open_write", path)
                else:
                    self._check("open", path)
            fd = super().open(path, flags, mode)
            if tracked:
                self._seen.add(path)
                node = self._cur.get(path)
                if node is None or not exists:
                    node = _Inode()
                    if exists:  # created behind our back: adopt as durable
                        node.durable = bytearray(open(path, "rb").read())
                    self._cur[path] = node
                if flags & os.O_TRUNC:
                    node.pending.append(("t", 0))
                self._fds[fd] = (node, path)
                self._dead_fds.discard(fd)
            return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)
            self._dead_fds.discard(fd)
        os.close(fd)

    def pread(self, fd: int, n: int, pos: int) -> bytes:
        with self._lock:
            node, path = self._node_for_fd(fd)
            if node is not None or self.crashed:
                self._check("pread", path)
        return os.pread(fd, n, pos)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
        with self._lock:
            node, path = self._node_for_fd(fd)
            b = bytes(data)
            if node is not None and self.crash_at_write is not None \
                    and self.writes + 1 >= self.crash_at_write and not self.crashed:
                self.crash_at_write = None
                if self.crash_tear:
                    part = b[:self.crash_tear]
                    super().pwrite(fd, part, pos)
                    node.pending.append(("w", pos, part))
                self.crashed = True
                raise OSError(_errno.EIO, "I/O error (power lost during this write)", path)
            if node is not None or self.crashed:
                partial = self._check("pwrite", path, len(b))
                if partial >= 0:
                    if partial:
                        assert node is not None     # crashed: _check raised instead
                        super().pwrite(fd, b[:partial], pos)
                        node.pending.append(("w", pos, b[:partial]))
                    raise OSError(_errno.ENOSPC, os.strerror(_errno.ENOSPC), path)
            super().pwrite(fd, b, pos)
            self.writes += 1
            if node is not None:
                node.pending.append(("w", pos, b))

    def ftruncate(self, fd: int, size: int) -> None:
        with self._lock:
            node, path = self._node_for_fd(fd)
            if node is not None or self.crashed:
                self._check("ftruncate", path)
            os.ftruncate(fd, size)
            if node is not None:
                node.pending.append(("t", size))

    def fsync(self, fd: int) -> None:
        with self._lock:
            node, path = self._node_for_fd(fd)
            if node is not None or self.crashed:
                self._check("fsync", path)
            # no real fsync: the model decides what survives, and tests stay fast
            self.fsyncs += 1
            if node is not None:
                node.sync()

    def fsize(self, fd: int) -> int:
        self._node_for_fd(fd)
        return os.fstat(fd).st_size

    def exists(self, path: str) -> bool:
        if self.crashed:
            raise OSError(_errno.EIO, "I/O error (power is off)", path)
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        path = self._norm(path)
        with self._lock:
            self._check_tracked("listdir", path)
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        path = self._norm(path)
        with self._lock:
            if not self._tracked(path):
                return super().makedirs(path)
            missing = []
            p = path
            while not os.path.isdir(p) and self._tracked(p):
                missing.append(p)
                p = os.path.dirname(p)
            if missing:
                self._check("makedirs", path)
            for p in reversed(missing):
                os.mkdir(p)
                self._cur[p] = _Inode(is_dir=True)

    def rename(self, src: str, dst: str) -> None:
        src, dst = self._norm(src), self._norm(dst)
        with self._lock:
            if self._tracked(src) or self._tracked(dst):
                self._check("rename", dst)
            os.replace(src, dst)
            self._seen.add(dst)
            prefix = src + os.sep
            for p in [p for p in self._cur if p == src or p.startswith(prefix)]:
                self._cur[dst + p[len(src):]] = self._cur.pop(p)
            for fd, (node, path) in list(self._fds.items()):
                if path == src or path.startswith(prefix):
                    self._fds[fd] = (node, dst + path[len(src):])

    def remove(self, path: str) -> None:
        path = self._norm(path)
        with self._lock:
            self._check_tracked("remove", path)
            super().remove(path)
            self._cur.pop(path, None)

    def rmtree(self, path: str) -> None:
        path = self._norm(path)
        with self._lock:
            self._check_tracked("rmtree", path)
            super().rmtree(path)
            prefix = path + os.sep
            for p in [p for p in self._cur if p == path or p.startswith(prefix)]:
                del self._cur[p]

    def size(self, path: str) -> int:
        if self.crashed:
            raise OSError(_errno.EIO, "I/O error (power is off)", path)
        return os.stat(path).st_size

    @property
    def supports_sync_filesystem(self) -> bool:
        return True

    def sync_filesystem(self, path: str) -> None:
        """syncfs(2) on the file system under ``root`` (op ``syncfs``): every file's pending
        writes and every directory's names become durable."""
        path = self._norm(path)
        with self._lock:
            if not self._check_tracked("syncfs", path):
                return super().sync_filesystem(path)
            self.fsyncs += 1
            dirs: dict = {}
            for p, node in self._cur.items():
                node.sync()
                if node.is_dir:
                    dirs.setdefault(p, {})
                # every name under root, also in directories made by os.makedirs (not
                # modelled as inodes): syncfs makes all names durable, as fsync_dir does one dir's
                if p != self.root:
                    dirs.setdefault(os.path.dirname(p), {})[os.path.basename(p)] = node
            for d, entries in dirs.items():
                self._dur[d] = entries

    def fsync_dir(self, path: str) -> None:
        path = self._norm(path)
        with self._lock:
            if not self._check_tracked("fsync_dir", path):
                return super().fsync_dir(path)
            self.dir_fsyncs += 1
            entries = {}
            for p, node in self._cur.items():
                if p != path and os.path.dirname(p) == path:
                    entries[os.path.basename(p)] = node
            self._dur[path] = entries
