"""A 100,000-entry ledger published as C2SP tiles, proven from the tiles alone (issue 18)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from merkle_memory import canonical
from merkle_memory.errors import ProofError
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.treelog import TreeLog
from merkle_memory.proof import verify_consistency, verify_inclusion
from merkle_memory.rfc6962 import hash_leaf
from merkle_memory.signed_note import HmacKey
from merkle_memory.tlog import FolderTiles, HttpTiles, Tile, TileClient, publish_tiles
from merkle_memory.tlog.tiles import new_tiles, tiles_for_size

# Building and publishing 100,000 entries takes ~10 s of CPU and ~800 fsyncs (well over 20 s on
# a busy disk); CI (.ci/run) runs slow tests too.
pytestmark = pytest.mark.slow

ORIGIN = "example.com/agents/big"
KEY = HmacKey("example.com/agents", bytes(range(100, 132)))
SIZE = 100_000


def _append(ledger: Ledger, start: int, count: int) -> None:
    for base in range(start, start + count, 10_000):
        items = [(f"mem-{i}", f"{i:064x}") for i in range(base, min(base + 10_000, start + count))]
        ledger.append_many(items, ts=1_700_000_000.0)


class _Published:
    def __init__(self, root: Path) -> None:
        self.tenant = root / "tenant"
        self.tenant.mkdir()
        self.ledger = Ledger(self.tenant / "ledger.jsonl")
        _append(self.ledger, 0, SIZE)
        self.out = root / "public"
        self.report = publish_tiles(self.tenant, self.out, ORIGIN, [KEY])


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> _Published:
    """The 100,000-entry ledger and its tiles, built once for this module."""
    return _Published(tmp_path_factory.mktemp("big"))


@pytest.fixture(scope="module")
def http_url(published: _Published) -> Iterator[str]:
    """A loopback HTTP server (stdlib ``http.server``) serving the tiles folder."""
    handler = functools.partial(_QuietHandler, directory=str(published.out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _check_random_proofs(client: TileClient, count: int, seed: int) -> None:
    """``count`` random entries: the entry from its bundle, its proof from the tiles, verified
    here against the signed checkpoint's root, and the entry is the ledger's entry there."""
    root = client.checkpoint.root
    for index in random.Random(seed).sample(range(client.size), count):
        data = client.entry(index)
        proof = client.inclusion_proof(index)
        verify_inclusion(hash_leaf(data), index, client.size, proof, root)
        entry = canonical.loads(data)
        assert isinstance(entry, dict) and entry["seq"] == index + 1
        assert entry["memory_id"] == f"mem-{index}"


def test_the_tiles_hold_the_sidecar_hashes(published: _Published) -> None:
    """Every tile of the 100,000-entry tree was written, and its hashes are the sidecar's: leaf
    hashes at level 0, the sidecar's perfect-subtree roots above."""
    report = published.report
    assert report.size == SIZE and report.old_size == 0
    hash_tiles = tiles_for_size(SIZE)
    assert len(report.written) == len(hash_tiles) + 391  # and one bundle per level-0 tile
    sidecar = TreeLog(published.tenant / "ledger.tree")
    for tile in hash_tiles:
        data = (published.out / tile.path()).read_bytes()
        first = tile.index * 256
        for i in range(0, tile.width, 37):
            expected = sidecar.perfect_root(8 * tile.level, first + i)
            assert data[32 * i : 32 * i + 32] == expected
    sidecar.close()


def test_1000_random_proofs_from_a_folder(published: _Published) -> None:
    """1,000 random inclusion proofs, from the folder's tiles and bundles alone, verify against
    the signed checkpoint (opened with the log's key)."""
    client = TileClient.open(FolderTiles(published.out), [KEY], ORIGIN)
    assert client.size == SIZE
    _check_random_proofs(client, 1000, seed=1)


def test_1000_random_proofs_over_http(published: _Published, http_url: str) -> None:
    """The same 1,000-proof check over a loopback HTTP server; consistency proofs too."""
    client = TileClient.open(HttpTiles(http_url), [KEY], ORIGIN)
    _check_random_proofs(client, 1000, seed=2)
    for old in (1, 255, 256, 65536, 99_999):
        proof = client.consistency_proof(old)
        verify_consistency(old, SIZE, proof, client.root_at(old), client.checkpoint.root)


def test_flipped_bytes_are_detected_over_http(published: _Published, http_url: str) -> None:
    """A byte flipped on disk in a tile of each kind (level 0 full and partial, level 1 full
    and partial, level 2, an entry bundle) is detected by the HTTP client reading it."""
    rng = random.Random(3)
    for path, index in (
        ("tile/0/123", 123 * 256 + 5),
        ("tile/0/390.p/160", 390 * 256 + 100),
        ("tile/1/000", 77 * 256),
        ("tile/1/001.p/134", 300 * 256),
        ("tile/2/000.p/1", 0),
        ("tile/entries/200", 200 * 256 + 9),
    ):
        file = published.out / path
        original = file.read_bytes()
        if "entries" in path:
            offset = rng.randrange(len(original))
        else:  # inside the hash the proof of ``index`` reads from this tile
            offset = 32 * ((index >> (8 * Tile.parse(path).level)) % 256) + 7
        flipped = original[:offset] + bytes([original[offset] ^ 0x20]) + original[offset + 1 :]
        file.write_bytes(flipped)
        try:
            client = TileClient.open(HttpTiles(http_url), [KEY], ORIGIN)
            with pytest.raises(ProofError):
                if "entries" in path:
                    for i in range(200 * 256, 201 * 256):
                        client.entry(i)
                else:
                    client.inclusion_proof(index)
        finally:
            file.write_bytes(original)


def test_publishing_again_writes_only_new_tiles(published: _Published) -> None:
    """1,000 more entries: only the new tiles and bundles are written, the earlier immutable
    files keep their inode, and the new tree extends the old one from the tiles alone."""
    old_client = TileClient.open(FolderTiles(published.out), [KEY], ORIGIN)
    inodes = {p: os.stat(published.out / p).st_ino for p in published.report.written}
    _append(published.ledger, SIZE, 1000)
    again = publish_tiles(published.tenant, published.out, ORIGIN, [KEY])
    expected = []
    for tile in new_tiles(SIZE, SIZE + 1000):
        expected.append(tile.path())
        if tile.level == 0:
            expected.append(Tile(-1, tile.index, tile.width).path())
    assert list(again.written) == expected and again.old_size == SIZE
    assert all(os.stat(published.out / p).st_ino == i for p, i in inodes.items())
    new_client = TileClient.open(FolderTiles(published.out), [KEY], ORIGIN)
    assert new_client.size == SIZE + 1000
    new_client.verify_extends(old_client.checkpoint)
    assert json.loads(new_client.entry(SIZE + 999))["seq"] == SIZE + 1000
    assert publish_tiles(published.tenant, published.out, ORIGIN, [KEY]).written == ()
