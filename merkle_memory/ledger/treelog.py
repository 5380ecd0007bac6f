"""The Merkle tree sidecar of a ledger: every RFC 6962 node hash, append-only, in post-order.

A ledger of ``n`` entries has ``n`` leaves (leaf data = the entry's canonical line without its
newline). Recomputing a proof from the ledger would reread and rehash every line, so a
sidecar file (``TENANT/ledger.tree`` beside ``TENANT/ledger.jsonl``) keeps the hashes.

Layout (decided here, documented for ``docs/FORMAT.md``): consecutive raw 32-byte hashes of
every *perfect* subtree of the tree, in post-order, i.e. in the order an appender completes
them. Appending leaf ``i`` writes its leaf hash, then the root of each perfect subtree that
leaf completes (one per trailing 1 bit of ``i``). So the file is append-only, holds
``2n - popcount(n)`` hashes for ``n`` leaves (twice a leaf-only file), and the root of the
perfect subtree of level ``L`` (``2**L`` leaves) starting at leaf ``s = index * 2**L`` sits at
hash position ``2s - popcount(s) + 2**(L+1) - 2``; a leaf hash is the level-0 case. Every hash
a proof needs is therefore one ``pread``: an inclusion or consistency proof at a million
entries reads O(log n) hashes and never rereads the ledger.

The sidecar is derived data, trusted for nothing: it can be rebuilt from the ledger at any
time (``rebuild``) and checked against it (``check``); ``ledger.proofs`` ties every hash it
serves to the ledger first. The file is opened with ``O_NOFOLLOW`` and ``O_NONBLOCK`` and only
when it is a regular file (``_fsio.open_regular``): a symlink or a FIFO in its place raises
``StoreFileError``. A torn tail (a crash mid-append leaves a byte count that is not
``32 * (2n - popcount(n))``) is ignored by readers and truncated by the next ``append``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._fsio import default_file_mode, fsync_dir, open_regular
from ..errors import IndexOutOfRangeError, StoreFileError, TreeLogError
from ..rfc6962 import EMPTY_ROOT, HASH_SIZE, CompactRange, hash_children, hash_leaf

__all__ = [
    "SIDECAR_NAME",
    "TreeLog",
    "TreeLogCheck",
    "leaves_for_node_count",
    "node_count",
    "node_position",
]

SIDECAR_NAME = "ledger.tree"
"""File name of the sidecar inside a tenant directory."""

_CHUNK_LEAVES = 8192


def node_count(leaves: int) -> int:
    """Return the number of hashes a sidecar of ``leaves`` leaves holds: ``2n - popcount(n)``."""
    return 2 * leaves - leaves.bit_count()


def leaves_for_node_count(count: int) -> int:
    """Return the largest leaf count ``n`` with ``node_count(n) <= count`` (``count >= 0``)."""
    n = (count + count.bit_length()) // 2 + 1
    while n > 0 and node_count(n) > count:
        n -= 1
    return n


def node_position(level: int, index: int) -> int:
    """Return the 0-based hash position of perfect subtree (``level``, ``index``) in the file.

    Args:
        level: subtree height; the subtree spans ``2**level`` leaves (0 = a leaf).
        index: which subtree of that level, counted from the left (0-based).
    """
    start = index << level
    return node_count(start) + (2 << level) - 2


def _group(leaf_hash: bytes, index: int, compact: CompactRange) -> bytes:
    """Append ``leaf_hash`` (leaf ``index``) to ``compact``; return the hashes to write."""
    out = [leaf_hash]
    hashes = compact.hashes
    node = leaf_hash
    i = index
    depth = 1
    while i & 1:
        node = hash_children(hashes[-depth], node)
        out.append(node)
        depth += 1
        i >>= 1
    compact.append(leaf_hash)
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class TreeLogCheck:
    """Result of ``TreeLog.check`` against the ledger's leaf data.

    Attributes:
        ok: the sidecar holds exactly the expected hashes (torn bytes beyond them aside).
        expected_leaves: number of leaf data items given.
        stored_leaves: number of complete leaves in the sidecar.
        first_bad_leaf: 0-based index of the first leaf whose hashes differ or are missing
            (``stored_leaves`` when the sidecar is merely behind), or ``None`` when ``ok``.
    """

    ok: bool
    expected_leaves: int
    stored_leaves: int
    first_bad_leaf: int | None


class TreeLog:
    """A sidecar file of RFC 6962 node hashes; a sequence of leaf hashes with O(1) access.

    ``len(tree)`` is the number of complete leaves, ``tree[i]`` the 32-byte hash of leaf ``i``
    and ``tree.perfect_root(level, index)`` the root of a perfect subtree, each one ``pread``
    on a descriptor kept open (opened on first use, closed by ``close``, by ``with`` or when
    the object is collected), so ``proof.inclusion_proof(i, n, tree)`` costs O(log n)
    ``pread`` calls and no ``open``. ``len`` re-checks the path (one ``stat``): if the file
    was replaced (``rebuild``), the new one is opened. A read beyond the leaves known so far
    refreshes that count first, so appends by other objects or processes are seen. Not for
    use by several threads at once (each thread can have its own ``TreeLog``). A read of a
    path that is a symlink or not a regular file raises ``StoreFileError``.
    """

    __slots__ = ("__weakref__", "_closer", "_fd", "_ident", "_leaves", "_path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Refer to the sidecar at ``path`` (it need not exist yet: then it has 0 leaves)."""
        self._path = Path(path)
        self._fd = -1
        self._ident: tuple[int, int] | None = None
        self._leaves = 0
        self._closer: weakref.finalize[[int], TreeLog] | None = None

    @property
    def path(self) -> Path:
        """The sidecar file's path."""
        return self._path

    def close(self) -> None:
        """Close the cached descriptor (the next read opens the file again)."""
        if self._closer is not None:
            self._closer()
            self._closer = None
        self._fd, self._ident, self._leaves = -1, None, 0

    def __enter__(self) -> TreeLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------

    def _refresh(self) -> int:
        """Re-stat the path, (re)open it if it names another file; return complete leaves."""
        try:
            st = os.lstat(self._path)
        except FileNotFoundError:
            self.close()
            return 0
        if (st.st_dev, st.st_ino) != self._ident:
            self.close()
            try:
                fd = open_regular(self._path, os.O_RDONLY, StoreFileError)
            except FileNotFoundError:
                return 0
            self._closer = weakref.finalize(self, os.close, fd)
            self._fd = fd
            st = os.fstat(fd)
            self._ident = (st.st_dev, st.st_ino)
        self._leaves = leaves_for_node_count(st.st_size // HASH_SIZE)
        return self._leaves

    def _need(self, leaves: int) -> bool:
        """Whether at least ``leaves`` complete leaves are stored (refreshing if needed)."""
        return leaves <= self._leaves or leaves <= self._refresh()

    def __len__(self) -> int:
        """Number of complete leaves stored (a torn tail is not counted)."""
        return self._refresh()

    def _read(self, position: int) -> bytes:
        data = os.pread(self._fd, HASH_SIZE, HASH_SIZE * position)
        if len(data) != HASH_SIZE:
            raise TreeLogError(f"sidecar {self._path} is shorter than it was a moment ago")
        return data

    def __getitem__(self, index: int) -> bytes:
        """Return the 32-byte hash of leaf ``index`` (0-based).

        Raises:
            IndexOutOfRangeError: ``index`` is not in ``0 <= index < len(self)``.
            TreeLogError: the file shrank while being read.
        """
        if type(index) is not int or index < 0 or not self._need(index + 1):
            raise IndexOutOfRangeError(f"leaf {index!r} is not in the sidecar")
        return self._read(node_position(0, index))

    def __iter__(self) -> Iterator[bytes]:
        """Yield every leaf hash in order."""
        for i in range(len(self)):
            yield self[i]

    def perfect_root(self, level: int, index: int) -> bytes:
        """Return the root of the ``2**level`` leaves starting at leaf ``index * 2**level``.

        Raises:
            IndexOutOfRangeError: that subtree is not complete in the sidecar.
        """
        if level < 0 or index < 0 or not self._need((index + 1) << level):
            raise IndexOutOfRangeError(f"perfect subtree ({level}, {index}) is not complete")
        return self._read(node_position(level, index))

    def compact_range(self, size: int | None = None) -> CompactRange:
        """Return the compact range of the first ``size`` leaves (all by default).

        Raises:
            IndexOutOfRangeError: ``size`` is negative or beyond the stored leaves.
        """
        if size is None:
            size = len(self)
        elif not (size >= 0 and self._need(size)):
            raise IndexOutOfRangeError(f"tree size {size} is not in 0..{self._leaves}")
        return _compact_range(self._fd, size) if size else CompactRange()

    def root(self, size: int | None = None) -> bytes:
        """Return the RFC 6962 root (32 bytes) of the first ``size`` leaves (all by default).

        Raises:
            IndexOutOfRangeError: ``size`` is negative or beyond the stored leaves.
        """
        if size == 0:
            return EMPTY_ROOT
        return self.compact_range(size).root()

    # --- writing ------------------------------------------------------------------------

    def append(self, leaf_hashes: Iterable[bytes]) -> int:
        """Append leaf hashes (32 bytes each) durably; return the new number of leaves.

        Takes an exclusive ``flock`` on the sidecar for the whole read-tail + write + fsync,
        truncates a torn tail first, writes all new hashes with one ``pwrite`` and fsyncs
        (the directory too when the file was created).

        Raises:
            HashLengthError: a leaf hash is not 32 bytes (nothing is written then).
            StoreFileError: the path is a symlink or not a regular file (never written).
            OSError: from the file system.
        """
        existed = os.path.lexists(self._path)
        fd = open_regular(self._path, os.O_RDWR | os.O_CREAT, StoreFileError)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return self._append_locked(fd, leaf_hashes)
        finally:
            os.close(fd)
            if not existed:
                fsync_dir(self._path.parent)

    def _append_locked(self, fd: int, leaf_hashes: Iterable[bytes]) -> int:
        count = os.fstat(fd).st_size // HASH_SIZE
        size = leaves_for_node_count(count)
        end = node_count(size) * HASH_SIZE
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)  # torn tail of an interrupted append: derived data
        compact = _compact_range(fd, size) if size else CompactRange()
        chunks = [_group(h, size + i, compact) for i, h in enumerate(leaf_hashes)]
        if chunks:
            data = b"".join(chunks)
            written = os.pwrite(fd, data, end)
            while written < len(data):
                written += os.pwrite(fd, data[written:], end + written)
        os.fsync(fd)
        return compact.size

    @classmethod
    def rebuild(cls, path: str | os.PathLike[str], leaf_data: Iterable[bytes]) -> TreeLog:
        """Write a fresh sidecar at ``path`` from leaf data, replacing any old one atomically.

        Args:
            path: the sidecar file.
            leaf_data: the leaf inputs in order (ledger lines without their newline).

        Returns:
            The rebuilt ``TreeLog``.

        Raises:
            OSError: from the file system (the old sidecar is then left as it was).
        """
        target = Path(path)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk, _ in _node_chunks(leaf_data):
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp_name, default_file_mode())  # as a plain open would, not mkstemp's 0600
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        fsync_dir(target.parent)
        return cls(target)

    def check(self, leaf_data: Iterable[bytes]) -> TreeLogCheck:
        """Compare the sidecar with the hashes recomputed from the ledger's leaf data.

        Reads the file sequentially once (O(n)); never changes it.

        Args:
            leaf_data: the leaf inputs in order (ledger lines without their newline).

        Raises:
            StoreFileError: the path is a symlink or not a regular file (never read).
        """
        stored = len(self)
        expected = 0
        first_bad: int | None = None
        position = 0
        with contextlib.ExitStack() as stack:
            try:
                fd = open_regular(self._path, os.O_RDONLY, StoreFileError)
                handle = stack.enter_context(os.fdopen(fd, "rb"))
            except FileNotFoundError:
                handle = None
            for chunk, leaves in _node_chunks(leaf_data):
                expected = leaves
                have = handle.read(len(chunk)) if handle is not None else b""
                if first_bad is None and have != chunk:
                    bad_at = position + _first_diff(have, chunk)
                    first_bad = leaves_for_node_count(bad_at)
                position += len(chunk) // HASH_SIZE
        if first_bad is None and stored != expected:
            first_bad = expected
        return TreeLogCheck(first_bad is None, expected, stored, first_bad)


def _compact_range(fd: int, size: int) -> CompactRange:
    """The compact range of the first ``size`` leaves, read from the sidecar open as ``fd``."""
    hashes: list[bytes] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            position = node_position(level, start >> level)
            data = os.pread(fd, HASH_SIZE, HASH_SIZE * position)
            if len(data) != HASH_SIZE:
                raise TreeLogError("sidecar is shorter than it was a moment ago")
            hashes.append(data)
            start += 1 << level
    return CompactRange(size, hashes)


def _first_diff(have: bytes, want: bytes) -> int:
    """Return the index of the first 32-byte hash where ``have`` differs from ``want``."""
    for i in range(0, len(want), HASH_SIZE):
        if have[i : i + HASH_SIZE] != want[i : i + HASH_SIZE]:
            return i // HASH_SIZE
    return len(want) // HASH_SIZE


def _node_chunks(leaf_data: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    """Yield (sidecar bytes, leaves so far) for ``leaf_data``, ``_CHUNK_LEAVES`` at a time."""
    compact = CompactRange()
    parts: list[bytes] = []
    for data in leaf_data:
        parts.append(_group(hash_leaf(data), compact.size, compact))
        if len(parts) == _CHUNK_LEAVES:
            yield b"".join(parts), compact.size
            parts = []
    if parts or not compact.size:
        yield b"".join(parts), compact.size
