"""Durable file primitives shared by the ledger, the bank and the node store (private).

Every write that must survive a crash goes through here: write a temp file in the target's own
folder, fsync it, ``os.replace`` it over the target, fsync the folder. Appends take an
exclusive ``fcntl.flock`` on the file for their whole read-check-write-fsync critical section.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

__all__ = [
    "atomic_write",
    "create_new",
    "create_tree_atomic",
    "default_file_mode",
    "exclusive_lock",
    "fsync_dir",
    "makedirs_durable",
    "open_regular",
    "read_regular_file",
    "write_all",
]

Refusal = Callable[[str, str], Exception]
"""Makes the error for a file that is refused: called with the path (``str``) and the
reason (``"a symbolic link (never followed)"``, ``"not a regular file (a FIFO)"``,
``"larger than 8,192 bytes"``)."""

_SYMLINK = "a symbolic link (never followed)"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))


def _what(mode: int) -> str:
    """Why a file of this ``st_mode`` is refused."""
    if stat.S_ISLNK(mode):
        return _SYMLINK
    kind = next((name for test, name in _KINDS if test(mode)), "a device or special file")
    return f"not a regular file ({kind})"


def open_regular(
    path: str | os.PathLike[str], flags: int, refuse: Refusal, mode: int = 0o644
) -> int:
    """Open a regular file of a store; never follow a symlink, never block on a FIFO.

    Opens with ``flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` (so a symlink, even a dangling
    one with ``O_CREAT``, is refused by the kernel and a FIFO never blocks the open), checks
    with ``fstat`` that the file is regular, then clears ``O_NONBLOCK``.

    Args:
        path: the file.
        flags: ``os.O_RDONLY``, ``os.O_RDWR | os.O_CREAT``, ...
        refuse: makes the error raised for a file that is not regular (see ``Refusal``).
        mode: permission bits of a file created by ``O_CREAT``.

    Returns:
        The open descriptor (the caller closes it).

    Raises:
        Exception: ``refuse(path, reason)`` when ``path`` is a symlink or not a regular file.
        OSError: any other failure (``FileNotFoundError`` when it does not exist).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        try:
            found = os.lstat(path).st_mode
        except OSError:
            raise exc from None
        if stat.S_ISREG(found):
            raise
        raise refuse(os.fspath(path), _what(found)) from None
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise refuse(os.fspath(path), _what(found))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(
    path: str | os.PathLike[str], refuse: Refusal, *, limit: int | None = None
) -> bytes | None:
    """The whole content of a regular file of a store, or ``None`` when it does not exist.

    Opened by ``open_regular`` (never through a symlink, never blocking on a FIFO).

    Args:
        path: the file.
        refuse: makes the error raised for a file that is refused (see ``Refusal``).
        limit: the most bytes the file may hold (``None``: no limit); at most ``limit + 1``
            bytes are read, so a huge file is never loaded whole.

    Raises:
        Exception: ``refuse(path, reason)`` for a symlink, a file that is not regular, or one
            larger than ``limit`` (reason ``"larger than 8,192 bytes"``).
        OSError: it exists but cannot be read.
    """
    try:
        fd = open_regular(path, os.O_RDONLY, refuse)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise refuse(os.fspath(path), f"larger than {limit:,} bytes")
    return data


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to the descriptor ``fd`` at its offset, looping over
    short writes (no flush: the caller fsyncs).

    Raises:
        OSError: from the file system (part of ``data`` may be written).
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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


def _remove_empty_tree(folder: Path, subdirs: Sequence[str]) -> None:
    """Remove ``folder`` and its ``subdirs`` if all are empty (``rmdir`` only: never data)."""
    for sub in (*reversed(subdirs), ""):
        with contextlib.suppress(OSError):
            os.rmdir(folder / sub)


def create_tree_atomic(path: str | os.PathLike[str], subdirs: Sequence[str]) -> bool:
    """Create the folder ``path`` already holding the empty folders ``subdirs``, in one rename.

    The tree is built in a temp folder beside ``path``, ``.<name>.creating-<pid>-<token>``
    (``os.mkdir``, so the umask applies as for a plain mkdir): each folder made, every folder
    that got an entry fsynced (deepest first), then ``os.rename`` to ``path`` and the parent
    fsynced. A crash at any step leaves either no ``path`` or the whole tree; at most the temp
    folder stays behind, and the next successful creation of ``path`` removes such leftovers
    when they hold only the empty ``subdirs``. Never creates missing parents.

    Args:
        path: the folder to create; its parent must exist.
        subdirs: ``/``-separated relative paths, each after its own parent (e.g.
            ``("memories", "memories/archive")``).

    Returns:
        True when this call created ``path``; False when ``path`` appeared meanwhile (made by
        another process; this call's temp folder is removed). ``os.rename`` replaces an empty
        folder created in that window.

    Raises:
        OSError: from the file system (``FileNotFoundError`` when the parent is missing,
            permission denied, ...); its ``filename`` is ``path``. Nothing is left but a temp
            folder a crash interrupted.
    """
    target = Path(path)
    prefix = f".{target.name}.creating-"
    build = target.parent / f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.mkdir(build)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
    try:
        for sub in subdirs:
            os.mkdir(build / sub)
        for folder in dict.fromkeys(str(Path(sub).parent) for sub in reversed(subdirs)):
            fsync_dir(build / folder)
        os.rename(build, target)
    except OSError as exc:
        _remove_empty_tree(build, subdirs)
        if os.path.lexists(target):
            return False
        raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
    fsync_dir(target.parent)
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        leftovers = [entry.name for entry in entries if entry.name.startswith(prefix)]
        for name in leftovers:
            _remove_empty_tree(target.parent / name, subdirs)
    return True


_umask: tuple[int, int] | None = None  # (process id, umask), read once per process


def default_file_mode() -> int:
    """What a plain ``open`` gives a new file: ``0o666`` less the process umask.

    The umask is read once per process (from ``/proc`` when it can be, else by setting and
    restoring it) and remembered: a program that changes its umask later keeps the first.
    """
    global _umask
    pid = os.getpid()
    if _umask is None or _umask[0] != pid:
        _umask = (pid, _read_umask())
    return 0o666 & ~_umask[1]


def _read_umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(
    path: str | os.PathLike[str], data: bytes | bytearray, mode: int | None = None
) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Writes a temp file in the same folder, fsyncs it, sets its permission bits to ``mode``
    (e.g. ``0o444``; by default what a plain ``open`` would give: ``0o666`` less the umask),
    renames it over ``path`` with ``os.replace`` and fsyncs the folder. On any failure the
    temp file is removed and ``path`` is left as it was.

    Raises:
        OSError: from the file system (folder missing or read-only, disk full, ...); its
            ``filename`` is ``path``, never the temp file's name.
    """
    target = Path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix="." + target.name + ".", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, default_file_mode() if mode is None else mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError) and exc.filename == tmp_name:
            raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
        raise
    fsync_dir(target.parent)


def create_new(path: str | os.PathLike[str], data: bytes, *, atomic: bool = True) -> None:
    """Create the file ``path`` holding ``data``, durably, with the mode a plain ``open``
    gives (``0o666`` less the umask, applied by the kernel: no ``chmod``).

    Args:
        path: the file to create (``O_NOFOLLOW``: never through a symlink).
        data: its content.
        atomic: ``True``: a temp file ``.<name>.<8 hex>.tmp`` is created exclusively beside
            it, written, fsynced and renamed to ``path`` (``os.replace``), then the folder is
            fsynced; a crash leaves ``path`` absent or whole (and at most the temp file).
            ``False``: ``path`` itself is created exclusively (``O_EXCL``), written, fsynced,
            then the folder is fsynced; a crash can leave it absent, empty or partly written,
            so only for files whose torn form is harmless.

    Raises:
        FileExistsError: ``atomic`` is ``False`` and ``path`` exists (nothing is written).
        OSError: from the file system; a file this call created is removed first, and the
            error's ``filename`` is ``path``.
    """
    target = os.fspath(path)  # text: no pathlib on the save path
    folder, base = os.path.split(target)
    name = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp") if atomic else target
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o666)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if atomic:
            os.replace(name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(name)
        if isinstance(exc, OSError):
            raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
        raise
    fsync_dir(folder or ".")


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], refuse: Refusal | None = None) -> Iterator[int]:
    """Hold an exclusive ``fcntl.flock`` on ``path`` (created if missing) for the block.

    Yields the open file descriptor (read-write, no truncation). The lock is released and the
    descriptor closed on exit. Blocks until the lock is free.

    Args:
        path: the file to lock.
        refuse: when given, ``path`` is opened by :func:`open_regular` (a symlink or a file
            that is not regular raises ``refuse(path, reason)``).
    """
    target = Path(path)
    existed = os.path.lexists(target)
    if refuse is None:
        fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
    else:
        fd = open_regular(target, os.O_RDWR | os.O_CREAT, refuse)
    try:
        if not existed:
            fsync_dir(target.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)
