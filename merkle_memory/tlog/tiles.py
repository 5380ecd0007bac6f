"""C2SP tlog-tiles: tile paths, which tiles a tree has, and a writer that publishes them.

A tiled log (c2sp.org/tlog-tiles) serves its Merkle tree as static files under a prefix:

* ``tile/<L>/<N>[.p/<W>]``: the ``N``-th tile of level ``L``, the concatenation of ``W``
  32-byte hashes; hash ``i`` of tile ``(L, N)`` is the root of the ``256**L`` leaves starting at
  leaf ``(N * 256 + i) * 256**L``, so level 0 holds leaf hashes and each hash of level
  ``L + 1`` is the root of one *full* tile (256 hashes, 8,192 bytes) of level ``L``. The right-
  most tile of a level is *partial* (``1 <= W <= 255``, the ``.p/<W>`` suffix) when the tree
  size is not a multiple of ``256**(L+1)``;
* ``tile/entries/<N>[.p/<W>]``: the entry bundle of the leaves of level-0 tile ``N``: each entry
  as a big-endian uint16 length followed by its bytes (so an entry is at most 65,535 bytes);
* ``checkpoint``: the signed checkpoint (the only file that changes).

``N`` is written in 3-digit groups, all but the last prefixed with ``x``: 1234067 is
``x001/x234/067``. Go's checksum database (golang.org/x/mod/sumdb/tlog) uses the same scheme
with the tile height in the path, ``tile/<H>/<L>/<N>``, and ``data`` for the entry level;
``Tile.path(sumdb=True)`` writes that form (its known answers are tested).

``write_tiles`` publishes a tree incrementally through a ``TileSink`` (``FolderSink`` for a
folder, ``merkle_memory.tlog.S3Tiles`` for a bucket prefix of an S3-compatible object store; the
same paths, the same bytes): it reads the checkpoint already published, checks that the tiles
and bundles it needs are there and right (re-creating a missing one, refusing a damaged one),
writes only the tiles and bundles that appeared or grew since (``new_tiles``), each immutable
resource written once (a folder: temp file, fsync, ``link`` to its name, so an existing file is
never replaced; one that differs is refused), flushes the sink (fsyncs the folders), checks that
the published tiles lead to the checkpoint's root, and only then replaces ``checkpoint``. Partial
tiles of earlier sizes stay in place (the spec lets a log delete them once the full tile exists;
keeping them serves clients that still hold an older checkpoint).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._fsio import atomic_write, fsync_dir, makedirs_durable, read_regular_file, write_all
from ..checkpoint import Checkpoint
from ..errors import CheckpointError, IndexOutOfRangeError, RootMismatchError, TileError
from ..proof import LeafSource, SubtreeSource
from ..rfc6962 import EMPTY_ROOT, HASH_SIZE, check_hash, hash_children, hash_leaf
from ..signed_note import Note, Verifier, open_note, parse_note

__all__ = [
    "CHECKPOINT_PATH",
    "ENTRIES_LEVEL",
    "MAX_CHECKPOINT_SIZE",
    "MAX_ENTRY_SIZE",
    "MAX_RESOURCE_SIZE",
    "TILE_HEIGHT",
    "TILE_PREFIX",
    "TILE_WIDTH",
    "FolderSink",
    "Tile",
    "TileSink",
    "TileWriteReport",
    "edge_tiles",
    "format_index",
    "new_tiles",
    "pack_entries",
    "parse_index",
    "perfect_hash",
    "read_log_file",
    "root_from_edge",
    "tile_hashes",
    "tiles_for_size",
    "unpack_entries",
    "write_tiles",
]

TILE_HEIGHT = 8
"""Levels of the Merkle tree one tile spans (C2SP tlog-tiles: always 8)."""

TILE_WIDTH = 1 << TILE_HEIGHT
"""Hashes in a full tile (256); a full tile is 8,192 bytes."""

ENTRIES_LEVEL = -1
"""The level number of entry bundles (``tile/entries/...``; ``data`` in Go sumdb paths)."""

MAX_ENTRY_SIZE = 0xFFFF
"""Largest entry an entry bundle can hold (its length is a big-endian uint16)."""

CHECKPOINT_PATH = "checkpoint"
"""Where the signed checkpoint is served, relative to the log's prefix."""

MAX_RESOURCE_SIZE = TILE_WIDTH * (MAX_ENTRY_SIZE + 2)
"""Largest tile or entry bundle read, in bytes: a full bundle of 256 entries of 65,535 bytes,
each after its 2-byte length (16,777,472 bytes; a full tile is only 8,192). A larger file is
refused unread."""

MAX_CHECKPOINT_SIZE = 1 << 20
"""Largest checkpoint read, in bytes (1 MiB; a signed checkpoint is a few hundred bytes, and
one with 100 signatures, the most a note may carry, is still under 30 KB)."""

TILE_PREFIX = "tile/"
"""Where tiles and entry bundles are served, relative to the log's prefix."""

_MAX_LEVEL = 63
_GROUP = re.compile(r"x[0-9]{3}\Z")
_LAST = re.compile(r"[0-9]{3}\Z")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)\Z")


def format_index(index: int) -> str:
    """Return a tile index in path form: 3-digit groups, all but the last prefixed ``x``.

    >>> format_index(1234067)
    'x001/x234/067'

    Raises:
        IndexOutOfRangeError: ``index`` is not an int >= 0.
    """
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise IndexOutOfRangeError(f"tile index {index!r} is not an int >= 0")
    text = f"{index % 1000:03d}"
    index //= 1000
    while index:
        text = f"x{index % 1000:03d}/{text}"
        index //= 1000
    return text


def parse_index(parts: Sequence[str]) -> int:
    """Parse the path elements of a tile index (``["x001", "x234", "067"]``); canonical only.

    Raises:
        TileError: an element of the wrong form, or a non-canonical index (``x000/001``).
    """
    if not parts or not _LAST.match(parts[-1]) or not all(_GROUP.match(p) for p in parts[:-1]):
        raise TileError(f"malformed tile index {'/'.join(parts)!r}")
    index = 0
    for part in parts:
        index = index * 1000 + int(part.lstrip("x"))
    if format_index(index) != "/".join(parts):
        raise TileError(f"tile index {'/'.join(parts)!r} is not in canonical form")
    return index


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile or entry bundle.

    Attributes:
        level: the tile level, ``0..63``; ``ENTRIES_LEVEL`` (-1) for an entry bundle.
        index: which tile of that level, ``>= 0``.
        width: how many hashes (or entries) it holds, ``1..2**height``; fewer than
            ``2**height`` makes it a partial tile.
        height: tree levels per tile: 8 for C2SP (the default); Go's sumdb paths carry it.
    """

    level: int
    index: int
    width: int = TILE_WIDTH
    height: int = TILE_HEIGHT

    def __post_init__(self) -> None:
        """Validate the fields.

        Raises:
            TileError: a value out of its range.
        """
        for name in ("level", "index", "width", "height"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TileError(f"tile {name} {value!r} is not an int")
        if not 1 <= self.height <= 30:
            raise TileError(f"tile height {self.height} is not in 1..30")
        if not ENTRIES_LEVEL <= self.level <= _MAX_LEVEL or self.index < 0:
            raise TileError(f"tile level {self.level} or index {self.index} out of range")
        if not 1 <= self.width <= 1 << self.height:
            raise TileError(f"tile width {self.width} is not in 1..{1 << self.height}")

    @property
    def full(self) -> bool:
        """Whether the tile holds all ``2**height`` hashes."""
        return self.width == 1 << self.height

    @property
    def is_entries(self) -> bool:
        """Whether this is an entry bundle rather than a hash tile."""
        return self.level == ENTRIES_LEVEL

    def path(self, *, sumdb: bool = False) -> str:
        """Return the tile's path below the log's prefix.

        Args:
            sumdb: write Go's checksum-database form ``tile/<H>/<L or data>/<N>[.p/<W>]``
                instead of C2SP's ``tile/<L or entries>/<N>[.p/<W>]`` (which needs height 8).

        Raises:
            TileError: a C2SP path asked for a height other than 8.
        """
        suffix = "" if self.full else f".p/{self.width}"
        if sumdb:
            level = "data" if self.is_entries else str(self.level)
            return f"tile/{self.height}/{level}/{format_index(self.index)}{suffix}"
        if self.height != TILE_HEIGHT:
            raise TileError("C2SP tile paths are for tiles of height 8")
        level = "entries" if self.is_entries else str(self.level)
        return f"tile/{level}/{format_index(self.index)}{suffix}"

    @classmethod
    def parse(cls, path: str, *, sumdb: bool = False) -> Tile:
        """Parse a tile path (the ``path`` form), strictly: canonical numbers only.

        Raises:
            TileError: anything else.
        """
        if not isinstance(path, str):
            raise TileError("a tile path is a string")
        parts = path.split("/")
        width: int | None = None
        if len(parts) >= 2 and parts[-2].endswith(".p"):
            if not _DECIMAL.match(parts[-1]):
                raise TileError(f"malformed partial width in {path!r}")
            width = int(parts[-1])
            parts = [*parts[:-2], parts[-2][:-2]]
        height = TILE_HEIGHT
        head = 2
        if sumdb:
            if len(parts) < 4 or not _DECIMAL.match(parts[1]):
                raise TileError(f"malformed tile path {path!r}")
            height, head = int(parts[1]), 3
        if len(parts) <= head or parts[0] != "tile":
            raise TileError(f"malformed tile path {path!r}")
        entries = "data" if sumdb else "entries"
        word = parts[head - 1]
        if word == entries:
            level = ENTRIES_LEVEL
        elif _DECIMAL.match(word):
            level = int(word)
        else:
            raise TileError(f"malformed tile level in {path!r}")
        index = parse_index(parts[head:])
        full = 1 << height if height <= 30 else 0
        if width is not None and not 1 <= width < full:
            raise TileError(f"partial width {width} in {path!r} is not in 1..{full - 1}")
        return cls(level, index, full if width is None else width, height)


def _level_counts(size: int, level: int, height: int) -> tuple[int, int]:
    """(full tiles, width of the partial tile or 0) of ``level`` for a tree of ``size``."""
    shift = height * level
    return size >> (shift + height), (size >> shift) & ((1 << height) - 1)


def tiles_for_size(size: int, *, height: int = TILE_HEIGHT) -> list[Tile]:
    """Every hash tile a tree of ``size`` leaves is served as (full tiles and the partial
    tile of each level), level 0 first; no entry bundles (they mirror level 0).

    Raises:
        IndexOutOfRangeError: ``size`` is not an int >= 0.
    """
    return new_tiles(0, size, height=height)


def new_tiles(old_size: int, new_size: int, *, height: int = TILE_HEIGHT) -> list[Tile]:
    """The hash tiles that a tree of ``new_size`` has and one of ``old_size`` had not (full
    tiles completed since, and each level's new partial tile), level 0 first.

    Go's ``tlog.NewTiles`` has the same meaning (its known answers are tested).

    Raises:
        IndexOutOfRangeError: sizes that are not ints with ``0 <= old_size <= new_size``.
    """
    for value in (old_size, new_size):
        if not isinstance(value, int) or isinstance(value, bool):
            raise IndexOutOfRangeError(f"tree size {value!r} is not an int")
    if not 0 <= old_size <= new_size:
        raise IndexOutOfRangeError(f"need 0 <= old size {old_size} <= new size {new_size}")
    out: list[Tile] = []
    level = 0
    while new_size >> (height * level):
        old_n = old_size >> (height * level)
        new_n = new_size >> (height * level)
        if old_n != new_n:
            for index in range(old_n >> height, new_n >> height):
                out.append(Tile(level, index, 1 << height, height))
            width = new_n & ((1 << height) - 1)
            if width:
                out.append(Tile(level, new_n >> height, width, height))
        level += 1
    return out


def _perfect(source: LeafSource, level: int, index: int) -> bytes:
    """Root of the ``2**level`` leaves starting at ``index * 2**level`` of ``source``."""
    if isinstance(source, SubtreeSource):
        return check_hash(source.perfect_root(level, index), "subtree root of the source")
    start = index << level
    layer = [check_hash(source[i], f"leaf hash {i}") for i in range(start, start + (1 << level))]
    while len(layer) > 1:
        layer = [hash_children(layer[j], layer[j + 1]) for j in range(0, len(layer), 2)]
    return layer[0]


def tile_hashes(tile: Tile, source: LeafSource) -> bytes:
    """Return the content of hash tile ``tile``: its ``width`` hashes concatenated.

    Args:
        tile: a hash tile (not an entry bundle) of height 8 or any other.
        source: the log's leaf hashes; one with ``perfect_root`` (``treelog.TreeLog``) serves
            every hash in O(1), a plain list is hashed.

    Raises:
        TileError: an entry bundle was asked for.
        IndexOutOfRangeError: the tile reaches past the source's leaves.
        HashLengthError: the source returned a hash that is not 32 bytes.
    """
    if tile.is_entries:
        raise TileError("tile_hashes serves hash tiles; entry bundles hold the entries")
    bits = tile.height * tile.level
    first = tile.index << tile.height
    end = (first + tile.width) << bits
    if end > len(source):
        raise IndexOutOfRangeError(f"tile {tile.path(sumdb=True)} needs {end} leaves")
    if bits == 0:
        return b"".join(check_hash(source[first + i], "leaf hash") for i in range(tile.width))
    return b"".join(_perfect(source, bits, first + i) for i in range(tile.width))


def perfect_hash(hashes: bytes) -> bytes:
    """Return the root of a perfect tree whose leaves are the concatenated 32-byte ``hashes``
    (a power-of-two count of them).

    Raises:
        TileError: the byte count is not 32 times a power of two.
    """
    count = len(hashes) // HASH_SIZE
    if count == 0 or len(hashes) % HASH_SIZE or count & (count - 1):
        raise TileError(f"{len(hashes)} bytes are not a power-of-two number of hashes")
    layer = [bytes(hashes[i : i + HASH_SIZE]) for i in range(0, len(hashes), HASH_SIZE)]
    while len(layer) > 1:
        layer = [hash_children(layer[j], layer[j + 1]) for j in range(0, len(layer), 2)]
    return layer[0]


def edge_tiles(size: int) -> list[Tile]:
    """The partial tile of every level of a tree of ``size`` leaves, top level first: together
    they hold the roots of the tree's compact range, so they lead to its root."""
    out: list[Tile] = []
    level = 0
    while size >> (TILE_HEIGHT * level):
        full, width = _level_counts(size, level, TILE_HEIGHT)
        if width:
            out.append(Tile(level, full, width))
        level += 1
    out.reverse()
    return out


def root_from_edge(size: int, read: Callable[[Tile], bytes]) -> bytes:
    """Return the root of a tree of ``size`` leaves from its partial tiles (``edge_tiles``),
    read with ``read(tile)``.

    Each partial tile of width ``W`` holds ``W`` roots of full lower tiles; the binary digits of
    ``W`` split them into perfect subtrees, and those, from the top level down, are the tree's
    compact range, folded right to left (RFC 6962 section 2.1).

    Raises:
        TileError: a tile of the wrong length (``read`` may raise its own errors).
    """
    pieces: list[bytes] = []
    for tile in edge_tiles(size):
        data = read(tile)
        if len(data) != tile.width * HASH_SIZE:
            raise TileError(
                f"{tile.path()} is {len(data)} bytes, expected {tile.width * HASH_SIZE}",
                path=tile.path(),
            )
        start = 0
        for bit in range(TILE_HEIGHT - 1, -1, -1):
            if tile.width >> bit & 1:
                end = start + (1 << bit)
                pieces.append(perfect_hash(data[start * HASH_SIZE : end * HASH_SIZE]))
                start = end
    if not pieces:
        return EMPTY_ROOT
    node = pieces[-1]
    for left in reversed(pieces[:-1]):
        node = hash_children(left, node)
    return node


def pack_entries(entries: Iterable[bytes]) -> bytes:
    """Return an entry bundle: each entry as a big-endian uint16 length and its bytes.

    Raises:
        TileError: an entry longer than 65,535 bytes, or not bytes.
    """
    out: list[bytes] = []
    for entry in entries:
        if not isinstance(entry, bytes | bytearray | memoryview):
            raise TileError(f"an entry is bytes, not {type(entry).__name__}")
        if len(entry) > MAX_ENTRY_SIZE:
            raise TileError(f"entry of {len(entry)} bytes exceeds the bundle limit of 65,535")
        out.append(len(entry).to_bytes(2, "big") + bytes(entry))
    return b"".join(out)


def unpack_entries(data: bytes, count: int, *, name: str = "entry bundle") -> list[bytes]:
    """Split an entry bundle holding exactly ``count`` entries.

    Args:
        data: the bundle's bytes.
        count: how many entries it must hold (its width).
        name: how the messages name the bundle (its path, say).

    Raises:
        TileError: a truncated entry, trailing bytes, or another number of entries (the
            message names the bundle, and the entry, 1-based, where it ends).
    """
    out: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 2 > len(data):
            raise TileError(
                f"{name} ends inside the length prefix of entry {len(out) + 1} of {count}"
            )
        length = int.from_bytes(data[offset : offset + 2], "big")
        offset += 2
        if offset + length > len(data):
            raise TileError(f"{name} ends inside entry {len(out) + 1} of {count}")
        out.append(bytes(data[offset : offset + length]))
        offset += length
    if len(out) != count:
        raise TileError(f"{name} holds {len(out)} entries, not {count}")
    return out


@dataclass(frozen=True, slots=True)
class TileWriteReport:
    """What ``write_tiles`` did.

    Attributes:
        old_size: the size of the checkpoint that was in the folder (0 if none).
        size: the size published now.
        written: paths of the tiles and bundles written, in order (immutable files), the
            re-created ones (``repaired``) first.
        kept: paths that already held exactly the right bytes (not rewritten).
        checkpoint_written: whether ``checkpoint`` was replaced.
        repaired: paths of tiles and bundles the published checkpoint needs that were
            missing and were written again.
    """

    old_size: int
    size: int
    written: tuple[str, ...]
    kept: tuple[str, ...]
    checkpoint_written: bool
    repaired: tuple[str, ...] = ()


@runtime_checkable
class TileSink(Protocol):
    """Where ``write_tiles`` publishes a log: the files (or objects) under the log's prefix,
    named by their path below it (``checkpoint``, ``tile/0/x001/234``, ``tile/entries/005.p/17``).

    ``FolderSink`` writes a folder; ``merkle_memory.tlog.S3Tiles`` a bucket prefix of an
    S3-compatible object store. ``write_tiles`` decides what to write and in what order; a sink
    only stores bytes: ``put`` each immutable tile and bundle, then ``flush``, and only then
    ``put_checkpoint`` (the one resource that is replaced). A sink must not acknowledge ``put``
    before the bytes are stored (a folder: written and fsynced; a bucket: the PUT answered).
    """

    @property
    def label(self) -> str:
        """How errors name the log's location (a folder path, ``s3://bucket/prefix``)."""
        ...

    def read(self, path: str) -> bytes | None:
        """Return the resource's bytes, or ``None`` when there is none.

        Raises:
            TileError: it cannot be read (other than absent).
        """
        ...

    def names(self, prefix: str) -> frozenset[str] | None:
        """The paths starting with ``prefix`` that the sink holds now, or ``None`` when it
        cannot list them cheaply (then ``read`` is asked for each). A path it lists may still
        be read; one it does not list is taken as absent (and written).

        Raises:
            TileError, OSError: the listing failed.
        """
        ...

    def put(self, path: str, data: bytes) -> None:
        """Store an immutable tile or bundle that ``read`` found absent; an existing one must
        never be replaced with other bytes (a folder refuses with ``TileError``).

        Raises:
            TileError, OSError: it cannot be stored.
        """
        ...

    def flush(self) -> None:
        """Make every ``put`` so far durable (a folder fsyncs the folders it wrote to).

        Raises:
            OSError, TileError: it cannot.
        """
        ...

    def put_checkpoint(self, data: bytes) -> None:
        """Replace the ``checkpoint`` atomically (readers see the old one or the new one).

        Raises:
            TileError, OSError: it cannot be stored.
        """
        ...


def read_log_file(path: str | os.PathLike[str], relative: str) -> bytes | None:
    """Read one file of a tiled log's folder: a tile, an entry bundle or the checkpoint.

    The file is opened with ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` (``_fsio.open_regular``):
    a symlink, a FIFO, a device or a folder in its place is refused without being followed,
    blocked on or read, and so is a file larger than ``MAX_CHECKPOINT_SIZE`` (the checkpoint)
    or ``MAX_RESOURCE_SIZE`` (any other file), read no further than one byte past the cap.

    Args:
        path: the file on disk.
        relative: its path below the log's prefix (``checkpoint``, ``tile/0/x001/234``).

    Returns:
        The file's bytes, or ``None`` when it does not exist.

    Raises:
        TileError: it is refused; the message names the file and the reason, ``path`` is
            ``relative``.
        OSError: it exists but cannot be read.
    """
    limit = MAX_CHECKPOINT_SIZE if relative == CHECKPOINT_PATH else MAX_RESOURCE_SIZE

    def refuse(where: str, why: str) -> TileError:
        return TileError(
            f"{where}: {why}; refusing to read it (a tiled log's files are regular files "
            f"of at most {limit:,} bytes)",
            path=relative,
        )

    return read_regular_file(path, refuse, limit=limit)


class FolderSink:
    """A ``TileSink`` writing a folder: each immutable file once (temp file, fsync, ``link``
    to its name, so an existing file is never replaced), the folders fsynced by ``flush``, and
    the checkpoint replaced atomically (temp file, fsync, rename, folder fsync)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Write under ``folder`` (created, durably, when missing).

        Raises:
            OSError: it cannot be created.
        """
        self.folder = Path(folder)
        makedirs_durable(self.folder)
        self._dirs: dict[Path, None] = {}

    def __repr__(self) -> str:
        return f"FolderSink({str(self.folder)!r})"

    @property
    def label(self) -> str:
        """The folder's path."""
        return str(self.folder)

    def read(self, path: str) -> bytes | None:
        """Return the file's bytes, or ``None`` when it does not exist.

        Raises:
            TileError: a symlink, a FIFO, a device, a folder or an oversized file in its place
                (``read_log_file``).
            OSError: it cannot be read.
        """
        return read_log_file(self.folder / path, path)

    def names(self, prefix: str) -> None:
        """``None``: a folder is asked file by file (a missing file costs one ``open``)."""
        return None

    def put(self, path: str, data: bytes) -> None:
        """Write a new immutable file: temp file, fsync, ``link`` to its name.

        Raises:
            TileError: a file appeared at ``path`` meanwhile with other bytes.
            OSError: from the file system.
        """
        target = self.folder / path
        makedirs_durable(target.parent)
        tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, target)
        except FileExistsError:
            if read_log_file(target, path) != data:  # raced with another writer: must agree
                raise _exists(path) from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            os.rename(tmp, target)  # no hard links here: the existence check above stands
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self._dirs[target.parent] = None

    def flush(self) -> None:
        """fsync every folder a ``put`` created a file in.

        Raises:
            OSError: from the file system.
        """
        for folder in self._dirs:
            fsync_dir(folder)
        self._dirs.clear()

    def put_checkpoint(self, data: bytes) -> None:
        """Replace ``checkpoint`` atomically and durably.

        Raises:
            OSError: from the file system.
        """
        atomic_write(self.folder / CHECKPOINT_PATH, data)


def _exists(path: str) -> TileError:
    return TileError(
        f"{path} already exists with other content: refusing to rewrite an immutable tile "
        "(is this another log's, or did the tree change?)",
        path=path,
    )


def _published(
    sink: TileSink, verifiers: Sequence[Verifier]
) -> tuple[Checkpoint, frozenset[str]] | None:
    """The checkpoint already published in ``sink`` and the names of its signing keys.

    Its signatures by one of ``verifiers`` (the same key name and key ID) must verify: a
    checkpoint edited after it was signed is refused first, before its contents are
    believed. Signatures by other keys (an older key of a rotation) are not checked.
    """
    data = sink.read(CHECKPOINT_PATH)
    if data is None:
        return None
    where = f"{sink.label}/{CHECKPOINT_PATH}"
    try:
        note = parse_note(data)
        checkpoint = Checkpoint.from_text(note.text)
    except CheckpointError as exc:
        raise TileError(f"{where}: not a checkpoint ({exc})") from exc
    keys = {(v.name, v.key_id) for v in verifiers}
    if any((sig.name, sig.key_id) in keys for sig in note.signatures):
        try:
            open_note(data, verifiers)
        except CheckpointError as exc:
            raise TileError(
                f"{where}: the published checkpoint's signature does not verify ({exc}): it was "
                "altered after it was signed; nothing written (if the tiles are this ledger's, "
                "remove it and run again)",
                path=CHECKPOINT_PATH,
            ) from exc
    return checkpoint, frozenset(s.name for s in note.signatures)


def _prefix_root(source: LeafSource, size: int) -> bytes:
    """The root of the first ``size`` leaves of ``source`` (its compact range, folded)."""
    pieces: list[bytes] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            pieces.append(_perfect(source, level, start >> level))
            start += 1 << level
    if not pieces:
        return EMPTY_ROOT
    node = pieces[-1]
    for left in reversed(pieces[:-1]):
        node = hash_children(left, node)
    return node


class _Publisher:
    """Puts each immutable resource once through a sink: one that is there with the same
    bytes is kept, one with other bytes refused."""

    def __init__(self, sink: TileSink, known: frozenset[str] | None) -> None:
        self.sink = sink
        self.known = known
        self.written: list[str] = []
        self.kept: list[str] = []

    def put(self, relative: str, data: bytes) -> None:
        listed = self.known is None or relative in self.known
        existing = self.sink.read(relative) if listed else None
        if existing is not None:
            if existing != data:
                raise _exists(relative)
            self.kept.append(relative)
            return
        self.sink.put(relative, data)
        self.written.append(relative)


def write_tiles(
    folder: str | os.PathLike[str] | TileSink,
    checkpoint_note: str | bytes,
    source: LeafSource,
    entries: Callable[[int, int], Sequence[bytes]] | None = None,
    *,
    verifiers: Sequence[Verifier] = (),
) -> TileWriteReport:
    """Publish the tree of a signed checkpoint as C2SP tiles under ``folder``, incrementally.

    Args:
        folder: the log's root folder (created if missing; ``checkpoint`` and ``tile/`` go
            in), or any ``TileSink`` (``merkle_memory.tlog.S3Tiles`` for a bucket prefix).
        checkpoint_note: the signed checkpoint of the tree to publish (verified by the caller;
            its size and root are read here, and the tiles must lead to that root).
        source: the log's leaf hashes, at least the checkpoint's size of them; one with
            ``perfect_root`` (``treelog.TreeLog``) serves upper tiles in O(1).
        entries: ``entries(start, end)`` returns the leaf data of leaves ``start..end-1``
            (ledger lines without their newline); when given, entry bundles are written and
            each entry must hash to its leaf hash. ``None``: hash tiles only.
        verifiers: the log's verifier keys: the published checkpoint's signatures by them
            must verify (checked first). Empty: its signatures are not checked.

    Returns:
        What was written (see ``TileWriteReport``).

    Every run first checks what the published checkpoint needs (nothing is written before):
    its signatures by ``verifiers`` must verify; it must be this log's (same origin, and
    signed under a key name that signs the new checkpoint too); every hash tile of its tree
    is read and checked against ``source`` (a full tile against its parent hash, a partial
    tile byte for byte) and every entry bundle (with ``entries``) must be the bytes this
    function writes (exactly its number of entries, each hashing to its leaf hash, so each
    is the ledger's line); a missing tile or bundle is written again
    (``TileWriteReport.repaired``).

    Order: every tile and bundle is put (and the sink flushed: fsynced, or acknowledged by
    the object store) before the checkpoint that covers them, so a reader never sees a
    checkpoint naming a tile not yet stored, whenever the writer stops. Nothing relies on a
    conditional write: the ledger is the only sequencer, and a re-run after a crash puts the
    same immutable bytes again.

    Raises:
        TileError: the published checkpoint has a bad signature by one of ``verifiers``, is
            another log's (another origin or key name), is larger than this one (a log never
            shrinks), is not a prefix of this tree (a fork), or is unreadable; a tile it needs
            differs from ``source`` or a bundle is not the ledger's (malformed, or an entry
            that is not the ledger's line; the error names the file and what is wrong:
            immutable files are never rewritten); an immutable file
            exists with other content; an entry does not hash to its leaf or is longer than
            65,535 bytes; the sink fails (an object store's error).
        CheckpointError: ``checkpoint_note`` is not a signed checkpoint.
        RootMismatchError: the tiles (a full tile versus its parent hash, or the tree's right
            edge versus the root) do not lead to the checkpoint's root; nothing is published
            then but tiles, and the old checkpoint stays.
        IndexOutOfRangeError: the source holds fewer leaves than the checkpoint's size.
        OSError: from the file system.
    """
    text = checkpoint_note.encode() if isinstance(checkpoint_note, str) else bytes(checkpoint_note)
    checkpoint = Checkpoint.from_text(parse_note(text).text)
    size = checkpoint.size
    if len(source) < size:
        raise IndexOutOfRangeError(f"the source has {len(source)} leaves, the tree {size}")
    sink: TileSink = folder if isinstance(folder, TileSink) else FolderSink(folder)
    label = sink.label
    found = _published(sink, verifiers)
    published = None if found is None else found[0]
    old_size = 0 if published is None else published.size
    if found is not None:
        _check_same_log(label, found[0], found[1], checkpoint, parse_note(text))
    if old_size > size:
        raise TileError(
            f"{label}: the published checkpoint has size {old_size}, more than {size}: "
            "a log never shrinks"
        )
    if published is not None and _prefix_root(source, old_size) != published.root:
        raise TileError(
            f"{label}: this tree does not extend the published checkpoint of size "
            f"{old_size} (another history, or another log's folder)"
        )
    known = sink.names(TILE_PREFIX)
    missing = _check_published(sink, old_size, source, entries is not None, known)
    publisher = _Publisher(sink, known)
    for tile in missing:  # re-create what the published checkpoint needs and is gone
        if tile.is_entries:
            if entries is not None:
                hashes = tile_hashes(Tile(0, tile.index, tile.width), source)
                publisher.put(tile.path(), _bundle(tile, hashes, entries))
        else:
            publisher.put(tile.path(), tile_hashes(tile, source))
    repaired = tuple(publisher.written)
    tiles = new_tiles(old_size, size)
    for tile in tiles:
        data = tile_hashes(tile, source)
        if tile.full:
            _check_parent(tile, data, source)
        publisher.put(tile.path(), data)
        if tile.level == 0 and entries is not None:
            bundle = Tile(ENTRIES_LEVEL, tile.index, tile.width)
            publisher.put(bundle.path(), _bundle(tile, data, entries))
    sink.flush()
    edge = root_from_edge(size, lambda tile: _read_back(sink, tile.path()))
    if edge != checkpoint.root:  # the right edge read back from the sink leads to the root
        paths = ", ".join(tile.path() for tile in edge_tiles(size))
        raise RootMismatchError(
            expected=checkpoint.root,
            calculated=edge,
            where=f"{label}: {paths} (the right edge, read back) against the new checkpoint's root",
        )
    changed = sink.read(CHECKPOINT_PATH) != text
    if changed:
        sink.put_checkpoint(text)
    return TileWriteReport(
        old_size, size, tuple(publisher.written), tuple(publisher.kept), changed, repaired
    )


def _read_back(sink: TileSink, path: str) -> bytes:
    data = sink.read(path)
    if data is None:
        raise TileError(f"{sink.label}/{path}: gone right after it was written", path=path)
    return data


def _check_same_log(
    label: str,
    published: Checkpoint,
    published_keys: frozenset[str],
    checkpoint: Checkpoint,
    note: Note,
) -> None:
    """The folder's checkpoint must be this log's: the same origin, signed under a key name
    that signs the new checkpoint too (a new key under the same name is a key rotation)."""
    if published.origin != checkpoint.origin:
        raise TileError(
            f"{label}: the published checkpoint is of log {published.origin!r}, not "
            f"{checkpoint.origin!r}: another log's folder (nothing written)"
        )
    names = {sig.name for sig in note.signatures}
    if not names & published_keys:
        raise TileError(
            f"{label}: the published checkpoint is signed by {', '.join(sorted(published_keys))}"
            f", not by {', '.join(sorted(names))}: another log's key (nothing written)"
        )


def _check_published(
    sink: TileSink, size: int, source: LeafSource, entries: bool, known: frozenset[str] | None
) -> list[Tile]:
    """Check every tile (and entry bundle, with ``entries``) the published checkpoint of
    ``size`` needs, before anything is written; return the missing ones, to re-create.

    Each hash tile is read and checked against the ledger: a full tile's hashes must hash to
    its parent hash (the root of its leaves, from ``source``: O(1) with a ``TreeLog``), a
    partial tile must equal the source's hashes. Each bundle must be the bytes this publisher
    writes: exactly its number of entries, each hashing to its leaf hash in the level-0 tile
    just checked (``_check_bundle``). Any difference raises ``TileError`` naming the file: an
    immutable file is never rewritten.
    """
    missing: list[Tile] = []
    for tile in tiles_for_size(size):
        needed = [tile]
        if entries and tile.level == 0:
            needed.append(Tile(ENTRIES_LEVEL, tile.index, tile.width))
        leaves: bytes | None = None  # the level-0 tile's hashes, once checked
        for item in needed:
            path = item.path()
            data = sink.read(path) if known is None or path in known else None
            if data is None:
                missing.append(item)
                continue
            if item.is_entries:
                if leaves is None:
                    leaves = tile_hashes(tile, source)
                _check_bundle(path, data, item, leaves)
                continue
            if len(data) != item.width * HASH_SIZE:
                raise _damaged(path, f"{len(data)} bytes, not {item.width * HASH_SIZE}")
            elif item.full:
                parent = _perfect(source, TILE_HEIGHT * (item.level + 1), item.index)
                if _full_tile_root(data) != parent:
                    raise _damaged(path, "its hashes differ from the ledger's")
            elif data != tile_hashes(item, source):
                raise _damaged(path, "its hashes differ from the ledger's")
            if item.level == 0:
                leaves = data
    return missing


def _check_bundle(path: str, data: bytes, bundle: Tile, leaves: bytes) -> None:
    """A published entry bundle must be the bytes this publisher writes: exactly its number
    of length-prefixed entries, each hashing to its leaf hash in ``leaves`` (the level-0
    tile's hashes, checked against the ledger), so each entry is the ledger's line.

    Raises:
        TileError: naming ``path`` and what is wrong (see ``_damaged``).
    """
    try:
        items = unpack_entries(data, bundle.width, name="it")
    except TileError as exc:
        raise _damaged(path, str(exc)) from None
    first = bundle.index * TILE_WIDTH
    for i, item in enumerate(items):
        if hash_leaf(item) != leaves[i * HASH_SIZE : (i + 1) * HASH_SIZE]:
            raise _damaged(path, f"entry {first + i} is not the ledger's entry seq {first + i + 1}")


def _full_tile_root(data: bytes) -> bytes:
    """``perfect_hash`` of a full tile's 256 hashes, hashing adjacent pairs in place (RFC 6962
    interior node: SHA-256 of 0x01 || left || right)."""
    sha256 = hashlib.sha256
    layer = data
    while len(layer) > HASH_SIZE:
        layer = b"".join(
            sha256(b"\x01" + layer[j : j + 2 * HASH_SIZE]).digest()
            for j in range(0, len(layer), 2 * HASH_SIZE)
        )
    return layer


def _damaged(path: str, why: str) -> TileError:
    return TileError(
        f"{path}: the published file differs from the ledger's tree ({why}); an immutable "
        "file is never rewritten: remove it and run again to have it re-created from the "
        "ledger (nothing written)",
        path=path,
    )


def _check_parent(tile: Tile, data: bytes, source: LeafSource) -> None:
    """A full tile's hashes must hash to its parent's hash (the root of its leaves)."""
    calculated = perfect_hash(data)
    parent = _perfect(source, TILE_HEIGHT * (tile.level + 1), tile.index)
    if calculated != parent:
        raise RootMismatchError(
            expected=parent, calculated=calculated, where=f"{tile.path()} against its parent hash"
        )


def _bundle(tile: Tile, hashes: bytes, entries: Callable[[int, int], Sequence[bytes]]) -> bytes:
    """The entry bundle of level-0 ``tile``, each entry checked against its leaf hash."""
    start = tile.index * TILE_WIDTH
    items = list(entries(start, start + tile.width))
    if len(items) != tile.width:
        raise TileError(f"entries({start}, {start + tile.width}) gave {len(items)} entries")
    for i, item in enumerate(items):
        if hash_leaf(item) != hashes[i * HASH_SIZE : (i + 1) * HASH_SIZE]:
            raise TileError(f"entry {start + i} does not hash to its leaf hash")
    return pack_entries(items)
