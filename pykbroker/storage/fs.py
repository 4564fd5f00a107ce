"""Tiny file-system seam for the storage layer.

Every disk operation of :mod:`pykbroker.storage` goes through a
:class:`FileSystem` object so that a fault-injecting implementation (torn
writes, EIO, ENOSPC, lost fsyncs) can be swapped in by tests later without
touching the log code.  The default, :data:`REAL_FS`, is a thin wrapper over
:mod:`os`.

File handles are plain integer file descriptors on purpose: the server sends
fetch data with ``os.sendfile(sock, fd, pos, len)``, which needs a real fd.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

__all__ = ["FileSystem", "REAL_FS"]


class FileSystem:
    """Real file system (default).  Methods mirror the :mod:`os` calls."""

    # -- descriptors -------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pread(self, fd: int, n: int, pos: int) -> bytes:
        return os.pread(fd, n, pos)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
        """Write *all* of ``data`` at ``pos`` (loops over short writes)."""
        n = os.pwrite(fd, data, pos)
        if n == len(data):   # the whole of it: nearly always (no memoryview made)
            return
        if n <= 0:  # pragma: no cover - defensive, pwrite raises instead
            raise OSError("short write")
        view = memoryview(data)[n:]
        pos += n
        while view:
            n = os.pwrite(fd, view, pos)
            if n <= 0:  # pragma: no cover - defensive, pwrite raises instead
                raise OSError("short write")
            view = view[n:]
            pos += n

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    # -- paths -------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def fsync_dir(self, path: str) -> None:
        """fsync a directory so that renames/creates in it are durable."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:  # some file systems refuse fsync on directories
            pass
        finally:
            os.close(fd)

    # Linux's syncfs(2): every dirty page and inode (content, names) of the one file system
    # holding ``path`` written back, and waited for; since Linux 5.8 it also reports writeback
    # errors of that file system.  One call replaces an fsync per file where many files were
    # written at once (a clean shutdown with thousands of partitions).
    @property
    def supports_sync_filesystem(self) -> bool:
        return _syncfs() is not None

    def sync_filesystem(self, path: str) -> None:
        """Make everything written on ``path``'s file system durable (OSError on failure)."""
        fn = _syncfs()
        if fn is None:
            raise OSError("syncfs is not available here")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            if fn(fd) != 0:
                import ctypes
                err = ctypes.get_errno()
                raise OSError(err, "syncfs: " + os.strerror(err), path)
        finally:
            os.close(fd)

    # -- whole-file helpers ------------------------------------------------
    def read_file(self, path: str) -> bytes:
        fd = self.open(path, os.O_RDONLY)
        try:
            chunks = []
            pos = 0
            while True:
                b = self.pread(fd, 1 << 20, pos)
                if not b:
                    break
                chunks.append(b)
                pos += len(b)
            return b"".join(chunks)
        finally:
            self.close(fd)

    def write_file_atomic(self, path: str, data: bytes, fsync: bool = True, staged: list | None = None) -> None:
        """Write ``data`` to ``path`` atomically: temp file, fsync, rename,
        fsync of the directory.  A crash leaves either the old or the new
        content, never a torn file (that is how Kafka writes checkpoints).
        ``staged`` (a list): only the temp file is written, unsynced, and
        ``(temp, path)`` appended; the caller makes the temp files durable
        (:meth:`sync_filesystem`), renames them, and syncs again: the same
        old-or-new guarantee for many files at the cost of two syncs."""
        tmp = path + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.pwrite(fd, data, 0)
            if fsync and staged is None:
                self.fsync(fd)
        finally:
            self.close(fd)
        if staged is not None:
            staged.append((tmp, path))
            return
        self.rename(tmp, path)
        if fsync:
            self.fsync_dir(os.path.dirname(path) or ".")


_SYNCFS: list = []


def _syncfs() -> Any:
    """libc's syncfs (None where there is none: not Linux, or no glibc symbol)."""
    if not _SYNCFS:
        fn = None
        try:
            import ctypes
            fn = ctypes.CDLL(None, use_errno=True).syncfs
            fn.argtypes = [ctypes.c_int]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError, ImportError):
            fn = None
        _SYNCFS.append(fn)
    return _SYNCFS[0]


REAL_FS = FileSystem()
