"""Durable file primitives shared by the ledger, the bank and the node store (private).

Every write that must survive a crash goes through here: write a temp file in the target's own
folder, fsync it, ``os.replace`` it over the target, fsync the folder. Appends take an
exclusive ``fcntl.flock`` on the file for their whole read-check-write-fsync critical section.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_write", "exclusive_lock", "fsync_dir", "makedirs_durable"]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and any missing parents, fsyncing each parent whose listing changed."""
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        fsync_dir(folder.parent)


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Writes a temp file in the same folder, fsyncs it, optionally sets its permission bits to
    ``mode`` (e.g. ``0o444``), renames it over ``path`` with ``os.replace`` and fsyncs the
    folder. On any failure the temp file is removed and ``path`` is left as it was.

    Raises:
        OSError: from the file system (folder missing or read-only, disk full, ...).
    """
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(
        prefix="." + target.name + ".", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_dir(target.parent)


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str]) -> Iterator[int]:
    """Hold an exclusive ``fcntl.flock`` on ``path`` (created if missing) for the block.

    Yields the open file descriptor (read-write, no truncation). The lock is released and the
    descriptor closed on exit. Blocks until the lock is free.
    """
    target = Path(path)
    existed = target.exists()
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not existed:
            fsync_dir(target.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)
