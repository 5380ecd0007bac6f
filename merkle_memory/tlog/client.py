"""A tiles client: proofs computed and checked from a tiled log's files alone (C2SP tlog-tiles).

``TileClient`` reads a log published with ``tiles.write_tiles`` (or by any C2SP tlog-tiles log
of SHA-256 RFC 6962 trees: Tessera, Sunlight, ...) through a fetcher: ``FolderTiles`` for a
folder, ``HttpTiles`` for an HTTP(S) base URL (stdlib ``urllib``; ``Content-Encoding: gzip``
understood). It trusts nothing it reads but the checkpoint, whose signature the caller (or
``TileClient.open``) verifies:

* the partial tiles of the tree's right edge are checked together against the checkpoint's root
  (they hold its compact range);
* every full tile is checked against its parent's hash (the root of its 256 hashes), up to a
  checked tile;
* every entry of a bundle must hash to its leaf hash.

So every hash served has been authenticated before it is used, and a changed byte in any tile
read raises (``RootMismatchError``, or ``TileError`` for a malformed tile). Proofs are then
computed with ``proof.inclusion_proof`` / ``consistency_proof`` over the client itself (it is a
``proof.SubtreeSource``) and verified against the roots before they are returned.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol

from ..checkpoint import Checkpoint, WitnessPolicy, open_checkpoint
from ..errors import (
    IndexOutOfRangeError,
    RootMismatchError,
    TileError,
    TileNotFoundError,
)
from ..proof import consistency_proof, inclusion_proof, verify_consistency, verify_inclusion
from ..rfc6962 import EMPTY_ROOT, HASH_SIZE, check_hash, hash_children, hash_leaf
from ..signed_note import Verifier
from .tiles import (
    CHECKPOINT_PATH,
    ENTRIES_LEVEL,
    MAX_RESOURCE_SIZE,
    TILE_HEIGHT,
    TILE_WIDTH,
    Tile,
    edge_tiles,
    perfect_hash,
    read_log_file,
    root_from_edge,
    tiles_for_size,
    unpack_entries,
)

__all__ = [
    "FolderTiles",
    "HttpTiles",
    "TileClient",
    "TileFetcher",
]


class TileFetcher(Protocol):
    """Fetches a resource of a tiled log by its path below the prefix (``checkpoint``,
    ``tile/0/x001/234``, ``tile/entries/005.p/17``)."""

    def fetch(self, path: str) -> bytes:
        """Return the resource's bytes.

        Raises:
            TileNotFoundError: the log does not serve it.
            TileError: it cannot be fetched.
        """
        ...


def _check_path(path: str) -> PurePosixPath:
    relative = PurePosixPath(path)
    if (
        not path
        or relative.is_absolute()
        or any(part in ("", ".", "..") for part in path.split("/"))
        or "\\" in path
        or "\x00" in path
    ):
        raise TileError(f"not a resource path of a log: {path!r}", path=path)
    return relative


class FolderTiles:
    """Reads a tiled log from a folder (what ``write_tiles`` writes, or a mirror of a log)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Read the log whose ``checkpoint`` and ``tile/`` are in ``folder``."""
        self._folder = Path(folder)

    def __repr__(self) -> str:
        return f"FolderTiles({str(self._folder)!r})"

    def fetch(self, path: str) -> bytes:
        """Return the file at ``path`` below the folder.

        The file is read by ``tiles.read_log_file``: never through a symlink, never blocking
        on a FIFO, and never more than ``MAX_RESOURCE_SIZE`` bytes (``MAX_CHECKPOINT_SIZE``
        for the checkpoint).

        Raises:
            TileNotFoundError: no such file.
            TileError: a path that leaves the folder, a symlink, a FIFO, a device, a folder or
                an oversized file in its place, or a file that cannot be read.
        """
        target = self._folder / _check_path(path)
        try:
            data = read_log_file(target, path)
        except OSError as exc:
            raise TileError(f"{target}: {exc.strerror or exc}", path=path) from exc
        if data is None:
            raise TileNotFoundError(f"{target}: not found", path=path)
        return data


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpTiles:
    """Reads a tiled log over HTTP(S) from its prefix URL (stdlib ``urllib``).

    Requests ask for ``gzip`` or ``identity`` and a gzip answer is decompressed (the spec lets
    logs gzip entry bundles without negotiation). Proxies come from the environment, except for
    loopback hosts. Redirects are followed by ``urllib``.
    """

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        """Read the log served under ``base_url`` (``https://log.example/prefix``), waiting
        at most ``timeout`` seconds for a connection and for each read of an answer (no
        retries).

        Raises:
            TileError: not an ``http`` or ``https`` URL.
        """
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise TileError(f"a log's URL is http:// or https://, not {base_url!r}")
        self._base = base_url.rstrip("/") + "/"
        self._timeout = timeout
        handlers: list[urllib.request.BaseHandler] = []
        if _loopback(parts.hostname):
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return f"HttpTiles({self._base!r})"

    def fetch(self, path: str) -> bytes:
        """GET ``<base>/<path>``.

        Raises:
            TileNotFoundError: HTTP 404 or 410.
            TileError: another HTTP error, a network error or timeout, a body too large, or
                a gzip body that does not decompress.
        """
        url = self._base + str(_check_path(path))
        request = urllib.request.Request(
            url, headers={"Accept-Encoding": "gzip, identity", "User-Agent": "merkle-memory"}
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                data: bytes = response.read(MAX_RESOURCE_SIZE + 1)
                encoding = (response.headers.get("Content-Encoding") or "identity").lower()
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                raise TileNotFoundError(f"{url}: HTTP {exc.code}", path=path) from exc
            raise TileError(f"{url}: HTTP {exc.code} {exc.reason}", path=path) from exc
        except (urllib.error.URLError, OSError) as exc:
            if isinstance(exc, TimeoutError) or isinstance(
                getattr(exc, "reason", None), TimeoutError
            ):
                raise TileError(f"{url}: no answer within {self._timeout:g} s", path=path) from exc
            raise TileError(f"{url}: {exc}", path=path) from exc
        if encoding == "gzip":
            try:
                decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = decoder.decompress(data, MAX_RESOURCE_SIZE + 1)
            except zlib.error as exc:
                raise TileError(f"{url}: bad gzip body", path=path) from exc
        elif encoding != "identity":
            raise TileError(f"{url}: unsupported Content-Encoding {encoding!r}", path=path)
        if len(data) > MAX_RESOURCE_SIZE:
            raise TileError(f"{url}: larger than any tile or bundle", path=path)
        return data


def _edge_label(size: int) -> str:
    """How a root mismatch of the right edge of a tree of ``size`` names what was checked."""
    paths = ", ".join(tile.path() for tile in edge_tiles(size))
    return f"{paths} (the right edge) against the checkpoint's root"


def _parent_label(tile: Tile, size: int) -> str:
    """How a root mismatch of full ``tile`` names what was checked: its parent hash, hash
    ``tile.index % 256`` of the tile above it in a tree of ``size``."""
    full, width = divmod(size >> (TILE_HEIGHT * (tile.level + 1)), TILE_WIDTH)
    number = tile.index // TILE_WIDTH
    parent = Tile(tile.level + 1, number, TILE_WIDTH if number < full else width)
    return (
        f"{tile.path()} against its parent hash (hash {tile.index % TILE_WIDTH} of {parent.path()})"
    )


class TileClient:
    """Proves inclusion and consistency from a tiled log's tiles and a trusted checkpoint.

    Also a ``proof.SubtreeSource`` of the checkpoint's tree: ``len(client)`` is its size,
    ``client[i]`` leaf ``i``'s hash and ``client.perfect_root(level, index)`` any of its perfect
    subtree roots, each authenticated (see the module docstring). Tiles are fetched on first
    use and kept; not for use by several threads at once.
    """

    def __init__(self, fetcher: TileFetcher, checkpoint: Checkpoint) -> None:
        """Read the tree of ``checkpoint`` (already verified by the caller) via ``fetcher``."""
        self._fetcher = fetcher
        self._checkpoint = checkpoint
        self._tiles: dict[tuple[int, int], bytes] = {}
        self._nodes: dict[tuple[int, int], bytes] = {}
        self._bundles: dict[int, list[bytes]] = {}
        self._edge_checked = False
        self.fetched = 0
        """How many resources were fetched so far."""

    @classmethod
    def open(
        cls,
        fetcher: TileFetcher,
        verifiers: Sequence[Verifier],
        origin: str | None = None,
        *,
        policy: WitnessPolicy | None = None,
    ) -> TileClient:
        """Fetch the log's ``checkpoint``, verify it, and read the tree it names.

        Args:
            fetcher: where the log is (``FolderTiles``, ``HttpTiles``).
            verifiers: the log's verifier keys.
            origin: when given, the checkpoint's origin must be this.
            policy: when given, the witness quorum the checkpoint must meet.

        Raises:
            TileNotFoundError: no checkpoint.
            CheckpointError: it does not verify.
        """
        note = fetcher.fetch(CHECKPOINT_PATH)
        return cls(fetcher, open_checkpoint(note, verifiers, origin, policy=policy))

    @property
    def checkpoint(self) -> Checkpoint:
        """The trusted checkpoint whose tree this client reads."""
        return self._checkpoint

    @property
    def size(self) -> int:
        """The tree size in leaves."""
        return self._checkpoint.size

    def __len__(self) -> int:
        return self._checkpoint.size

    def __getitem__(self, index: int, /) -> bytes:
        """The authenticated 32-byte hash of leaf ``index``."""
        return self.perfect_root(0, index)

    def leaf_hash(self, index: int) -> bytes:
        """Return the authenticated 32-byte hash of leaf ``index`` (0-based).

        Raises:
            IndexOutOfRangeError: ``index`` is not in the tree.
            TileNotFoundError, TileError, RootMismatchError: as ``perfect_root``.
        """
        return self.perfect_root(0, index)

    # --- authenticated tiles -----------------------------------------------------------

    def _get(self, tile: Tile) -> bytes:
        data = self._fetcher.fetch(tile.path())
        self.fetched += 1
        if len(data) != tile.width * HASH_SIZE:
            raise TileError(
                f"{tile.path()} is {len(data)} bytes, expected {tile.width * HASH_SIZE}",
                path=tile.path(),
            )
        return data

    def _check_edge(self) -> None:
        """Fetch the partial tiles of every level and check them against the root."""
        if self._edge_checked:
            return
        fetched: dict[tuple[int, int], bytes] = {}

        def read(tile: Tile) -> bytes:
            fetched[tile.level, tile.index] = data = self._get(tile)
            return data

        calculated = root_from_edge(self.size, read)
        if calculated != self._checkpoint.root:
            raise RootMismatchError(
                expected=self._checkpoint.root,
                calculated=calculated,
                where=_edge_label(self.size),
            )
        self._tiles.update(fetched)
        self._edge_checked = True

    def _tile(self, level: int, index: int) -> bytes:
        """The authenticated content of hash tile (``level``, ``index``) of this tree."""
        key = (level, index)
        found = self._tiles.get(key)
        if found is not None:
            return found
        shift = TILE_HEIGHT * level
        full = self.size >> (shift + TILE_HEIGHT)
        if index < full:
            tile = Tile(level, index)
            data = self._get(tile)
            parent = self._hash(level + 1, index)
            calculated = perfect_hash(data)
            if calculated != parent:
                raise RootMismatchError(
                    expected=parent, calculated=calculated, where=_parent_label(tile, self.size)
                )
            self._tiles[key] = data
            return data
        if index == full and (self.size >> shift) % TILE_WIDTH:
            self._check_edge()
            return self._tiles[key]
        raise IndexOutOfRangeError(f"tile ({level}, {index}) is not in a tree of {self.size}")

    def _hash(self, level: int, index: int) -> bytes:
        """Hash ``index`` of tile level ``level`` (the root of 256**level leaves)."""
        data = self._tile(level, index // TILE_WIDTH)
        offset = (index % TILE_WIDTH) * HASH_SIZE
        return data[offset : offset + HASH_SIZE]

    def perfect_root(self, level: int, index: int) -> bytes:
        """Return the authenticated root of the ``2**level`` leaves from ``index * 2**level``.

        Raises:
            IndexOutOfRangeError: that subtree is not complete in the tree.
            TileNotFoundError: a tile needed is not served.
            TileError: a tile is malformed.
            RootMismatchError: a tile does not lead to the checkpoint's root.
        """
        if (
            not isinstance(level, int)
            or not isinstance(index, int)
            or level < 0
            or index < 0
            or (index + 1) << level > self.size
        ):
            raise IndexOutOfRangeError(
                f"perfect subtree ({level}, {index}) is not complete in a tree of {self.size}"
            )
        key = (level, index)
        found = self._nodes.get(key)
        if found is not None:
            return found
        tile_level, depth = divmod(level, TILE_HEIGHT)
        first = index << depth
        data = self._tile(tile_level, first // TILE_WIDTH)
        offset = (first % TILE_WIDTH) * HASH_SIZE
        chunk = data[offset : offset + (HASH_SIZE << depth)]
        node = perfect_hash(chunk) if depth else chunk
        self._nodes[key] = node
        return node

    # --- roots and proofs -----------------------------------------------------------------

    def root_at(self, size: int) -> bytes:
        """Return the root of the first ``size`` leaves, from authenticated hashes.

        Raises:
            IndexOutOfRangeError: ``size`` is not in ``0..self.size``.
        """
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= self.size:
            raise IndexOutOfRangeError(f"size {size!r} is not in 0..{self.size}")
        if size == self.size:
            self._check_edge()
            return self._checkpoint.root
        if size == 0:
            return EMPTY_ROOT
        pieces: list[bytes] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                pieces.append(self.perfect_root(level, start >> level))
                start += 1 << level
        node = pieces[-1]
        for left in reversed(pieces[:-1]):
            node = hash_children(left, node)
        return node

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return the RFC 6962 inclusion proof of leaf ``index`` in the tree of ``size`` leaves
        (the checkpoint's by default), verified against that tree's root before it is returned.

        Raises:
            IndexOutOfRangeError: ``index`` or ``size`` out of range.
            TileNotFoundError, TileError, RootMismatchError: a tile needed is missing,
                malformed or not authentic.
        """
        size = self.size if size is None else size
        proof = inclusion_proof(index, size, self)
        verify_inclusion(self.leaf_hash(index), index, size, proof, self.root_at(size))
        return proof

    def verify_leaf(self, index: int, leaf_data: bytes) -> list[bytes]:
        """Check that ``leaf_data`` is leaf ``index`` of the checkpoint's tree; return the
        inclusion proof that shows it.

        Raises:
            RootMismatchError: the data's leaf hash is not in that tree at ``index``.
            IndexOutOfRangeError, TileNotFoundError, TileError: as ``inclusion_proof``.
        """
        proof = self.inclusion_proof(index)
        verify_inclusion(hash_leaf(leaf_data), index, self.size, proof, self._checkpoint.root)
        return proof

    def consistency_proof(self, old_size: int, size: int | None = None) -> list[bytes]:
        """Return the RFC 6962 consistency proof from ``old_size`` to ``size`` (the checkpoint's
        by default), verified against both roots before it is returned.

        Raises:
            IndexOutOfRangeError: sizes out of range (``old_size`` 0 included).
            TileNotFoundError, TileError, RootMismatchError: as ``inclusion_proof``.
        """
        size = self.size if size is None else size
        proof = consistency_proof(old_size, size, self)
        verify_consistency(old_size, size, proof, self.root_at(old_size), self.root_at(size))
        return proof

    def verify_extends(self, old: Checkpoint) -> list[bytes]:
        """Check that this tree extends the trusted older checkpoint ``old`` (its root is this
        tree's root of ``old.size`` leaves); return the consistency proof.

        Raises:
            RootMismatchError: it does not (a fork or a rewrite of history).
            IndexOutOfRangeError: ``old`` is larger than this tree, or empty.
        """
        check_hash(old.root, "old root")
        proof = self.consistency_proof(old.size)
        verify_consistency(old.size, self.size, proof, old.root, self._checkpoint.root)
        return proof

    # --- entries ----------------------------------------------------------------------------

    def entry(self, index: int) -> bytes:
        """Return the authenticated data of leaf ``index`` from its entry bundle.

        Raises:
            IndexOutOfRangeError: ``index`` is not in the tree.
            TileNotFoundError: the bundle is not served.
            TileError: a malformed bundle, or an entry that does not hash to its leaf.
        """
        if not isinstance(index, int) or not 0 <= index < self.size:
            raise IndexOutOfRangeError(f"entry {index!r} is not in a tree of {self.size}")
        return self._bundle(index // TILE_WIDTH)[index % TILE_WIDTH]

    def _bundle(self, number: int) -> list[bytes]:
        found = self._bundles.get(number)
        if found is not None:
            return found
        full = self.size // TILE_WIDTH
        width = TILE_WIDTH if number < full else self.size % TILE_WIDTH
        tile = Tile(ENTRIES_LEVEL, number, width)
        data = self._fetcher.fetch(tile.path())
        self.fetched += 1
        items = unpack_entries(data, width, name=tile.path())
        hashes = self._tile(0, number)
        for i, item in enumerate(items):
            if hash_leaf(item) != hashes[i * HASH_SIZE : (i + 1) * HASH_SIZE]:
                raise TileError(
                    f"{tile.path()}: entry {number * TILE_WIDTH + i} does not hash to its leaf",
                    path=tile.path(),
                )
        self._bundles[number] = items
        return items

    def audit(self, *, entries: bool = True) -> int:
        """Fetch and authenticate every tile of the tree (and every entry bundle); O(size).

        Returns:
            The number of tiles and bundles checked.

        Raises:
            TileNotFoundError, TileError, RootMismatchError: the first one that fails.
        """
        count = 0
        for tile in tiles_for_size(self.size):
            self._tile(tile.level, tile.index)
            count += 1
        if entries:
            for number in range(-(-self.size // TILE_WIDTH)):
                self._bundle(number)
                count += 1
        return count

    def edge(self) -> list[Tile]:
        """The partial tiles checked against the checkpoint's root (top level first)."""
        return edge_tiles(self.size)
