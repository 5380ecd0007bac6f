"""C2SP tlog-tiles: paths, tile math against the definitions, the writer and the client."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import asset_path

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, sign_checkpoint
from merkle_memory.errors import (
    IndexOutOfRangeError,
    ProofError,
    RootMismatchError,
    TileError,
    TileNotFoundError,
)
from merkle_memory.proof import verify_consistency, verify_inclusion
from merkle_memory.rfc6962 import hash_children, hash_leaf
from merkle_memory.signed_note import HmacKey
from merkle_memory.tlog import FolderTiles, Tile, TileClient, write_tiles
from merkle_memory.tlog.tiles import (
    edge_tiles,
    format_index,
    new_tiles,
    pack_entries,
    parse_index,
    tile_hashes,
    tiles_for_size,
    unpack_entries,
)

KEY = HmacKey("log.example/tiles", bytes(range(32)))
ORIGIN = "log.example/tiles"


def _asset(*parts: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(asset_path(*parts).read_text())
    return data


def _mth(d: list[bytes]) -> bytes:
    """Naive RFC 6962 MTH, straight from section 2.1."""
    if len(d) == 1:
        return d[0]
    k = 1
    while k * 2 < len(d):
        k *= 2
    return hash_children(_mth(d[:k]), _mth(d[k:]))


def _log(n: int) -> tuple[list[bytes], list[bytes]]:
    data = [b"entry %d" % i for i in range(n)]
    return data, [hash_leaf(d) for d in data]


def _note(leaves: list[bytes], size: int) -> str:
    return sign_checkpoint(Checkpoint(ORIGIN, size, rfc6962.root(leaves[:size])), [KEY])


class _Log:
    """A 70,000-leaf log written once as tiles (levels 0-2, full and partial tiles)."""

    def __init__(self, folder: Path) -> None:
        self.data, self.leaves = _log(70000)
        self.folder = folder
        write_tiles(folder, _note(self.leaves, 70000), self.leaves, lambda s, e: self.data[s:e])
        self.checkpoint = Checkpoint(ORIGIN, 70000, rfc6962.root(self.leaves))
        self.files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }


@pytest.fixture(scope="module")
def log70k(tmp_path_factory: pytest.TempPathFactory) -> _Log:
    """The 70,000-leaf log, shared by the tests that only read it."""
    return _Log(tmp_path_factory.mktemp("log70k"))


class _Flipped:
    """Serves the files of a log from memory, with one byte of one file flipped."""

    def __init__(self, files: dict[str, bytes], path: str, offset: int) -> None:
        self.files = files
        self.path = path
        self.offset = offset

    def fetch(self, path: str) -> bytes:
        data = self.files.get(path)
        if data is None:
            raise TileNotFoundError(path, path=path)
        if path == self.path:
            data = data[: self.offset] + bytes([data[self.offset] ^ 1]) + data[self.offset + 1 :]
        return data


# --- paths ---------------------------------------------------------------------------------


def test_c2sp_index_example_and_round_trips() -> None:
    """tlog-tiles: index 1234067 is x001/x234/067; small and large indices round-trip."""
    example = _asset("tlog", "c2sp_signed_note_and_tiles.json")["tlog_tiles"]
    assert format_index(example["tile_index_path_example"]["index"]) == "x001/x234/067"
    assert example["tile_index_path_example"]["path"] == "x001/x234/067"
    for index in (0, 1, 999, 1000, 1001, 999_999, 10**12 + 7):
        assert parse_index(format_index(index).split("/")) == index
    assert format_index(5) == "005" and format_index(1000) == "x001/000"


def test_golang_sumdb_tile_paths() -> None:
    """Go's tilePaths table: Tile.path(sumdb=True) writes each valid path, and parse reads it
    back (or refuses the invalid ones)."""
    for path, tile in _asset("tlog_upstream", "golang_mod_tiles.json")["tile_paths"]:
        if tile is None:
            with pytest.raises(TileError):
                Tile.parse(path, sumdb=True)
            continue
        height, level, index, width = tile
        expected = Tile(level, index, width, height)
        assert expected.path(sumdb=True) == path
        assert Tile.parse(path, sumdb=True) == expected


def test_c2sp_paths_and_strict_parsing() -> None:
    """C2SP paths: full, partial and entry-bundle forms round-trip; non-canonical numbers,
    zero or full partial widths, levels above 63 and sumdb forms are refused."""
    for tile, path in [
        (Tile(0, 1234067), "tile/0/x001/x234/067"),
        (Tile(2, 0, 1), "tile/2/000.p/1"),
        (Tile(-1, 5, 17), "tile/entries/005.p/17"),
        (Tile(-1, 1000), "tile/entries/x001/000"),
    ]:
        assert tile.path() == path and Tile.parse(path) == tile
    for bad in (
        "tile/0/x000/001",
        "tile/0/01",
        "tile/00/001",
        "tile/0/001.p/0",
        "tile/0/001.p/256",
        "tile/0/001.p/07",
        "tile/64/000",
        "tile/data/000",
        "tile/8/0/000",
        "tiles/0/000",
        "tile/0/",
        "tile/-1/000",
    ):
        with pytest.raises(TileError):
            Tile.parse(bad)
    with pytest.raises(TileError):
        Tile(0, 0, 3, 2).path()  # height 2 has no C2SP path
    with pytest.raises(TileError):
        Tile(0, 0, 0)


# --- which tiles a tree has ----------------------------------------------------------------


def test_tile_counts_match_the_spec_examples() -> None:
    """tlog-tiles: 70,000 leaves are 273 full level-0 tiles, one of width 112, one full level-1
    tile, one of width 17 and one level-2 tile of width 1; 256 leaves are one full tile and a
    level-1 tile of width 1."""
    spec = _asset("tlog", "c2sp_signed_note_and_tiles.json")["tlog_tiles"]
    tiles = tiles_for_size(70000)
    by_level: dict[int, list[Tile]] = {}
    for tile in tiles:
        by_level.setdefault(tile.level, []).append(tile)
    case = spec["tree_size_70000"]
    assert sum(t.full for t in by_level[0]) == case["full_level0"]
    assert [t.width for t in by_level[0] if not t.full] == [case["partial_level0_width"]]
    assert sum(t.full for t in by_level[1]) == case["full_level1"]
    assert [t.width for t in by_level[1] if not t.full] == [case["partial_level1_width"]]
    assert [t.width for t in by_level[2]] == [case["partial_level2_width"]]
    assert tiles_for_size(256) == [
        Tile(0, 0),
        Tile(1, 0, spec["tree_size_256"]["partial_level1_width"]),
    ]
    assert edge_tiles(70000) == [Tile(2, 0, 1), Tile(1, 1, 17), Tile(0, 273, 112)]
    assert tiles_for_size(0) == [] and edge_tiles(0) == []


def test_new_tiles_matches_go() -> None:
    """Go's TestNewTilesForSize (height 10): the number of new tiles between two sizes."""
    data = _asset("tlog_upstream", "golang_mod_tiles.json")
    height = data["new_tiles_height"]
    for old, new, count in data["new_tiles"]:
        assert len(new_tiles(old, new, height=height)) == count, (old, new)
    with pytest.raises(IndexOutOfRangeError):
        new_tiles(5, 4)


def test_new_tiles_since_any_size_covers_exactly_what_changed() -> None:
    """For sizes up to 600 (height 8) and height 2 up to 70: the tiles of the new size are the
    old size's tiles that did not change plus exactly new_tiles(old, new)."""
    for height, top in ((8, 600), (2, 70)):
        for new in range(top + 1):
            everything = set(tiles_for_size(new, height=height))
            for old in range(0, new + 1, 7 if height == 8 else 1):
                fresh = new_tiles(old, new, height=height)
                assert len(set(fresh)) == len(fresh)
                assert set(fresh) <= everything
                assert everything - set(fresh) <= set(tiles_for_size(old, height=height))


def test_tile_hashes_match_the_definition() -> None:
    """Hash i of tile (l, n) is MTH(D[(n*W + i) * W**l : (n*W + i + 1) * W**l]), W = 2**height:
    checked for height 2 over 70 leaves (levels 0..3) and height 8 over 600 leaves."""
    for height, size in ((2, 70), (8, 600)):
        _, leaves = _log(size)
        width = 1 << height
        for tile in tiles_for_size(size, height=height):
            data = tile_hashes(tile, leaves)
            span = width**tile.level
            for i in range(tile.width):
                start = (tile.index * width + i) * span
                expected = _mth(leaves[start : start + span])
                assert data[32 * i : 32 * i + 32] == expected


def test_entry_bundles_round_trip_and_refuse_garbage() -> None:
    """Bundles are uint16 length-prefixed entries; a short, long or miscounted bundle and an
    entry over 65,535 bytes are refused."""
    items = [b"", b"a", bytes(300), bytes(65535)]
    packed = pack_entries(items)
    assert packed[:6] == b"\x00\x00\x00\x01a\x01"
    assert unpack_entries(packed, 4) == items
    for bad, count in ((packed[:-1], 4), (packed + b"\x00", 4), (packed, 3), (b"\x00", 1)):
        with pytest.raises(TileError):
            unpack_entries(bad, count)
    with pytest.raises(TileError):
        pack_entries([bytes(65536)])


# --- writer and client ----------------------------------------------------------------------


def test_write_then_prove_everything_from_the_folder_alone(tmp_path: Path) -> None:
    """A tree of 1,300 leaves written as tiles: every inclusion proof, consistency proofs from
    many sizes and every entry come back from the tiles and verify against the roots."""
    data, leaves = _log(1300)
    report = write_tiles(tmp_path, _note(leaves, 1300), leaves, lambda s, e: data[s:e])
    assert report.old_size == 0 and report.size == 1300 and report.checkpoint_written
    client = TileClient.open(FolderTiles(tmp_path), [KEY], ORIGIN)
    root = rfc6962.root(leaves)
    for i in range(1300):
        proof = client.inclusion_proof(i)
        verify_inclusion(leaves[i], i, 1300, proof, root)
        assert client.entry(i) == data[i]
    for old in (1, 2, 255, 256, 257, 1000, 1299, 1300):
        proof = client.consistency_proof(old)
        verify_consistency(old, 1300, proof, rfc6962.root(leaves[:old]), root)
        assert client.root_at(old) == rfc6962.root(leaves[:old])
    assert client.audit() == len(tiles_for_size(1300)) + 6
    with pytest.raises(RootMismatchError):
        client.verify_leaf(7, b"not entry 7")


def test_incremental_writes_only_new_tiles_and_never_rewrites(tmp_path: Path) -> None:
    """Growing 1,000 -> 1,300 -> 1,300 -> 5,000 writes exactly the new tiles and bundles; files
    written before keep their inode and bytes; a re-run writes nothing."""
    data, leaves = _log(5000)
    entries: Callable[[int, int], list[bytes]] = lambda s, e: data[s:e]  # noqa: E731
    first = write_tiles(tmp_path, _note(leaves, 1000), leaves, entries)
    assert first.written == (
        "tile/0/000", "tile/entries/000", "tile/0/001", "tile/entries/001",
        "tile/0/002", "tile/entries/002", "tile/0/003.p/232", "tile/entries/003.p/232",
        "tile/1/000.p/3",
    )  # fmt: skip
    stamps = {p: os.stat(tmp_path / p).st_ino for p in first.written}
    second = write_tiles(tmp_path, _note(leaves, 1300), leaves, entries)
    expected = []
    for tile in new_tiles(1000, 1300):
        expected.append(tile.path())
        if tile.level == 0:
            expected.append(Tile(-1, tile.index, tile.width).path())
    assert list(second.written) == expected and second.old_size == 1000
    again = write_tiles(tmp_path, _note(leaves, 1300), leaves, entries)
    assert again.written == () and not again.checkpoint_written
    third = write_tiles(tmp_path, _note(leaves, 5000), leaves, entries)
    assert "tile/0/003" in second.written and "tile/0/005.p/20" in second.written
    assert "tile/0/005" in third.written and "tile/0/005.p/20" not in third.written
    for path, inode in stamps.items():
        assert os.stat(tmp_path / path).st_ino == inode  # never replaced
    assert (tmp_path / "tile/0/003.p/232").stat().st_size == 232 * 32  # kept for old clients
    client = TileClient.open(FolderTiles(tmp_path), [KEY])
    assert client.size == 5000 and client.audit() == len(tiles_for_size(5000)) + 20


def test_the_writer_refuses_shrinking_forks_and_foreign_files(tmp_path: Path) -> None:
    """A smaller checkpoint than the published one, a tree that does not extend it, and an
    existing immutable file with other bytes are refused; the checkpoint is left as it was."""
    data, leaves = _log(600)
    write_tiles(tmp_path, _note(leaves, 500), leaves, lambda s, e: data[s:e])
    published = (tmp_path / "checkpoint").read_bytes()
    with pytest.raises(TileError, match="never shrinks"):
        write_tiles(tmp_path, _note(leaves, 400), leaves)
    forked = [*leaves[:100], hash_leaf(b"evil"), *leaves[101:]]
    with pytest.raises(TileError, match="does not extend"):
        write_tiles(tmp_path, _note(forked, 600), forked)
    other = tmp_path / "other"
    write_tiles(other, _note(leaves, 300), leaves)
    (other / "tile/0/001.p/44").unlink()
    (other / "tile/0/001").write_bytes(bytes(8192))
    with pytest.raises(TileError, match="other content"):
        write_tiles(other, _note(leaves, 512), leaves)
    assert (tmp_path / "checkpoint").read_bytes() == published


def test_entries_must_hash_to_their_leaves(tmp_path: Path) -> None:
    """An entry source that disagrees with the leaf hashes is refused before any checkpoint."""
    _, leaves = _log(300)
    with pytest.raises(TileError, match="does not hash to its leaf"):
        write_tiles(tmp_path, _note(leaves, 300), leaves, lambda s, e: [b"x" * 3] * (e - s))
    assert not (tmp_path / "checkpoint").exists()


def test_publication_order_is_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tile is written to a temp file, fsynced, then linked to its name; every folder that
    got a tile is fsynced; only then is ``checkpoint`` replaced (temp, fsync, rename, fsync)."""
    data, leaves = _log(300)
    calls: list[tuple[str, str]] = []
    fds: dict[int, str] = {}

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "open":
                result = real(*args, **kwargs)
                fds[result] = os.fsdecode(args[0])
                return result
            if name in ("link", "replace", "rename"):
                calls.append((name, os.path.relpath(os.fsdecode(args[1]), tmp_path)))
            elif name == "fsync":
                path = fds.get(args[0], "?")
                calls.append((name, os.path.relpath(path, tmp_path) if path != "?" else path))
            return real(*args, **kwargs)

        return call

    for name in ("open", "fsync", "link", "replace", "rename"):
        monkeypatch.setattr(os, name, wrap(name, getattr(os, name)))
    write_tiles(tmp_path, _note(leaves, 300), leaves, lambda s, e: data[s:e])
    monkeypatch.undo()
    links = [i for i, c in enumerate(calls) if c[0] == "link"]
    replace = calls.index(("replace", "checkpoint"))
    assert [calls[i][1] for i in links] == [
        "tile/0/000", "tile/entries/000", "tile/0/001.p/44", "tile/entries/001.p/44",
        "tile/1/000.p/1",
    ]  # fmt: skip
    for i in links:
        assert calls[i - 1][0] == "fsync" and ".tmp" in calls[i - 1][1]
    synced_dirs = {c[1] for c in calls[links[-1] : replace] if c[0] == "fsync"}
    assert {os.path.dirname(calls[i][1]) for i in links} <= synced_dirs
    assert calls[replace - 1][0] == "fsync" and ".checkpoint." in calls[replace - 1][1]
    assert calls[replace + 1] == ("fsync", ".")


def test_a_flipped_byte_in_any_tile_or_bundle_is_detected(log70k: _Log) -> None:
    """For every tile and bundle of a 70,000-leaf log (levels 0-2, full and partial), flipping
    one byte makes the first read that uses it raise, never serve a wrong hash or entry."""
    rng = random.Random(18)
    tiles = sorted(p for p in log70k.files if p.startswith("tile/"))
    assert len(tiles) == 2 * 274 + 2 + 1
    for path in tiles:
        tile = Tile.parse(path)
        offset = rng.randrange(len(log70k.files[path]))
        client = TileClient(_Flipped(log70k.files, path, offset), log70k.checkpoint)
        if tile.is_entries:
            with pytest.raises(ProofError):
                for i in range(tile.index * 256, tile.index * 256 + tile.width):
                    assert client.entry(i) == log70k.data[i]
        else:
            position = tile.index * 256 + offset // 32
            with pytest.raises(ProofError):
                client.leaf_hash(min(position << (8 * tile.level), 69999))
    honest = TileClient(_Flipped(log70k.files, "", 0), log70k.checkpoint)
    assert honest.audit() == 551 and honest.entry(69999) == log70k.data[69999]
    on_disk = TileClient.open(FolderTiles(log70k.folder), [KEY], ORIGIN)
    for i in random.Random(7).sample(range(70000), 50):
        verify_inclusion(
            log70k.leaves[i], i, 70000, on_disk.inclusion_proof(i), on_disk.checkpoint.root
        )


def test_missing_and_malformed_tiles(tmp_path: Path) -> None:
    """A missing tile raises TileNotFoundError, a truncated one TileError; a path that leaves
    the folder is refused; sizes and indices out of range raise IndexOutOfRangeError."""
    data, leaves = _log(600)
    write_tiles(tmp_path, _note(leaves, 600), leaves, lambda s, e: data[s:e])
    checkpoint = Checkpoint(ORIGIN, 600, rfc6962.root(leaves))
    (tmp_path / "tile/0/001").unlink()
    with pytest.raises(TileNotFoundError):
        TileClient(FolderTiles(tmp_path), checkpoint).leaf_hash(300)
    (tmp_path / "tile/0/000").write_bytes(bytes(100))
    with pytest.raises(TileError, match="expected 8192"):
        TileClient(FolderTiles(tmp_path), checkpoint).leaf_hash(3)
    with pytest.raises(TileError):
        FolderTiles(tmp_path).fetch("../checkpoint")
    client = TileClient(FolderTiles(tmp_path), checkpoint)
    for call in (
        lambda: client.leaf_hash(600),
        lambda: client.root_at(601),
        lambda: client.consistency_proof(0),
        lambda: client.entry(-1),
        lambda: client.perfect_root(9, 1),
    ):
        with pytest.raises(IndexOutOfRangeError):
            call()
    assert client.perfect_root(9, 0) == rfc6962.root(leaves[:512])


def test_empty_tree(tmp_path: Path) -> None:
    """A checkpoint of size 0 publishes no tile; the client's root is the empty root."""
    write_tiles(tmp_path, _note([], 0), [])
    client = TileClient.open(FolderTiles(tmp_path), [KEY])
    assert client.size == 0 and client.root_at(0) == rfc6962.EMPTY_ROOT
    assert not (tmp_path / "tile").exists()


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_every_run_recreates_missing_files_and_refuses_damaged_ones(tmp_path: Path) -> None:
    """Each run checks every tile and bundle the published checkpoint needs: missing ones are
    written again with the same bytes (listed in ``repaired``, first in ``written``); a full or
    partial tile with a flipped byte, a tile of the wrong length or a truncated bundle is
    refused with its path, nothing written, even when the tree grew."""
    data, leaves = _log(700)
    entries: Callable[[int, int], list[bytes]] = lambda s, e: data[s:e]  # noqa: E731
    write_tiles(tmp_path, _note(leaves, 600), leaves, entries)
    published = _files(tmp_path)
    for path in ("tile/0/001", "tile/entries/002.p/88", "tile/1/000.p/2"):
        (tmp_path / path).unlink()
    report = write_tiles(tmp_path, _note(leaves, 600), leaves, entries)
    assert report.repaired == ("tile/0/001", "tile/entries/002.p/88", "tile/1/000.p/2")
    assert report.written == report.repaired and not report.checkpoint_written
    assert _files(tmp_path) == published

    for path, damage in (
        ("tile/0/000", lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:]),
        ("tile/0/002.p/88", lambda b: b[:-1] + bytes([b[-1] ^ 0x80])),
        ("tile/1/000.p/2", lambda b: b[:32]),
        ("tile/entries/001", lambda b: b + b"\x00"),
    ):
        original = (tmp_path / path).read_bytes()
        (tmp_path / path).write_bytes(damage(original))
        damaged = _files(tmp_path)
        for size in (600, 700):
            with pytest.raises(TileError) as caught:
                write_tiles(tmp_path, _note(leaves, size), leaves, entries)
            assert caught.value.path == path
            assert str(caught.value).startswith(
                f"{path}: the published file differs from the ledger's tree ("
            )
            assert _files(tmp_path) == damaged
        (tmp_path / path).unlink()
        assert write_tiles(tmp_path, _note(leaves, 600), leaves, entries).repaired == (path,)
        assert _files(tmp_path) == published
    grown = write_tiles(tmp_path, _note(leaves, 700), leaves, entries)
    assert grown.repaired == () and grown.written[0] == "tile/0/002.p/188"


def test_another_origin_or_key_name_is_refused(tmp_path: Path) -> None:
    """A folder published for one log refuses a checkpoint of another origin or signed under
    another key name, writing nothing; a new key under the same name (a rotation) is taken."""
    _, leaves = _log(300)
    write_tiles(tmp_path, _note(leaves, 200), leaves)
    published = _files(tmp_path)
    root = rfc6962.root(leaves[:300])
    other_origin = sign_checkpoint(Checkpoint("other.example/x", 300, root), [KEY])
    with pytest.raises(TileError) as caught:
        write_tiles(tmp_path, other_origin, leaves)
    assert str(caught.value) == (
        f"{tmp_path}: the published checkpoint is of log {ORIGIN!r}, not 'other.example/x': "
        "another log's folder (nothing written)"
    )
    other_key = sign_checkpoint(
        Checkpoint(ORIGIN, 300, root), [HmacKey("other.example/k", bytes(32))]
    )
    with pytest.raises(TileError) as caught:
        write_tiles(tmp_path, other_key, leaves)
    assert str(caught.value) == (
        f"{tmp_path}: the published checkpoint is signed by {KEY.name}, not by "
        "other.example/k: another log's key (nothing written)"
    )
    assert _files(tmp_path) == published
    rotated = sign_checkpoint(Checkpoint(ORIGIN, 300, root), [HmacKey(KEY.name, bytes(32))])
    assert write_tiles(tmp_path, rotated, leaves).written == (
        "tile/0/000",
        "tile/0/001.p/44",
        "tile/1/000.p/1",
    )
