"""The transcript archive inside the SQLite and PostgreSQL node stores (schema version 2):
file rows and versions, chunks and their checks, keys, provisional nodes, one transaction per
batch, and version 1 SQLite stores (PostgreSQL's migration: test_store_postgres)."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from servers import ArchiveTarget

from merkle_memory.dag import Bucket, ContentBlock, Node, open_store
from merkle_memory.dag.store import ArchiveStore, FileUpdate, SQLiteNodeStore
from merkle_memory.errors import NodeStoreError


def text_node(text: str, parent: str | None = None) -> Node:
    return Node.create(Bucket("message", "user", (ContentBlock("text", text=text),)), parent)


def sqlite_store(path: Path) -> SQLiteNodeStore:
    store = open_store(path)
    assert isinstance(store, SQLiteNodeStore)
    return store


def archive(target: ArchiveTarget) -> ArchiveStore:
    store = open_store(target.store)
    assert isinstance(store, ArchiveStore)
    return store


def update(path: str, data: bytes = b"", **changes: Any) -> FileUpdate:
    """The update of a file ``path`` now holding ``data`` (archived whole unless ``chunks``
    is given), with ``changes``."""
    base = FileUpdate(
        path=path,
        format="claude-code",
        device=1,
        inode=2,
        size=len(data),
        mtime_ns=3,
        digest=hashlib.sha256(data).hexdigest(),
        new_version=False,
        chunks=((0, data),) if data else (),
        when=100.0,
    )
    return dataclasses.replace(base, **changes)


def test_file_rows_versions_and_bytes(archive_store: ArchiveTarget) -> None:
    """A file's row, its versions and their bytes read back; a new version starts at offset
    0 and the old one stays readable."""
    with archive(archive_store) as store:
        store.sync_file(update("/f", b"hello ", resume={"kind": "archive"}))
        store.sync_file(update("/f", b"hello world", chunks=((6, b"world"),), when=200.0))
        state = store.file_states()["/f"]
        assert (state.size, state.version, state.first_sync, state.last_sync) == (11, 1, 100, 200)
        assert b"".join(store.archived_bytes("/f")) == b"hello world"
        store.sync_file(update("/f", b"new", new_version=True, when=300.0))
        assert b"".join(store.archived_bytes("/f")) == b"new"
        assert b"".join(store.archived_bytes("/f", 1)) == b"hello world"
        [listed] = store.archived_files()
        assert (listed.path, listed.version, listed.versions, listed.size) == ("/f", 2, 2, 3)
        assert listed.to_dict()["last_sync"] == 300.0


@pytest.mark.parametrize(
    ("tamper", "args", "message"),
    [
        ('UPDATE {file_chunks} SET "offset" = 1', (), "chunk at offset 1, expected 0"),
        ("DELETE FROM {chunks}", (), "is missing"),
        ("UPDATE {chunks} SET data = ?", (b"\x00",), "is corrupt"),
        ("UPDATE {versions} SET size = 99", (), r"does not match its digest \(5 of 99 bytes\)"),
    ],
)
def test_archived_bytes_are_checked(
    archive_store: ArchiveTarget, tamper: str, args: tuple[Any, ...], message: str
) -> None:
    """A chunk out of place, missing, not zlib, or a version whose digest or size differs:
    NodeStoreError naming the file, never wrong bytes."""
    with archive(archive_store) as store:
        store.sync_file(update("/f", b"hello"))
    archive_store.sql(tamper, *args)
    with archive(archive_store) as store, pytest.raises(NodeStoreError, match=message) as info:
        b"".join(store.archived_bytes("/f"))
    assert str(info.value).startswith("archive of /f: ")
    with archive(archive_store) as store, pytest.raises(NodeStoreError, match="no archived"):
        b"".join(store.archived_bytes("/g"))


def test_chunks_with_equal_bytes_are_stored_once(archive_store: ArchiveTarget) -> None:
    """Two files with equal bytes share one chunk row; each keeps its own chunk list."""
    with archive(archive_store) as store:
        store.sync_files([update("/a", b"same"), update("/b", b"same")])
    assert archive_store.sql("SELECT count(*) FROM {chunks}") == [(1,)]
    assert archive_store.sql("SELECT count(*) FROM {file_chunks}") == [(2,)]
    [(data,)] = archive_store.sql("SELECT data FROM {chunks}")
    assert zlib.decompress(data) == b"same"


def test_keys_are_looked_up_one_at_a_time(archive_store: ArchiveTarget) -> None:
    """``sync_keys`` is a mapping over the stored keys of one file (a key may hold a NUL or
    a lone surrogate); a new version forgets them."""
    node = text_node("a")
    odd = "u\x00\udcff"
    with archive(archive_store) as store:
        store.sync_file(update("/f", b"x", nodes=(node,), keys={"u1": node.hash, "u0": None}))
        store.sync_file(update("/e", b"x", keys={odd: node.hash}))
        odd_keys = store.sync_keys(store.file_states()["/e"])
        assert (odd_keys[odd], list(odd_keys)) == (node.hash, [odd])
        store.sync_file(update("/g", b"y", keys={"u1": None}))
        keys = store.sync_keys(store.file_states()["/f"])
        assert "u1" in keys and "u2" not in keys and 5 not in keys
        assert (keys["u1"], keys["u0"], len(keys), sorted(keys)) == (
            node.hash,
            None,
            2,
            ["u0", "u1"],
        )
        with pytest.raises(KeyError):
            keys["u2"]
        store.sync_file(update("/f", b"z", new_version=True))
        assert len(store.sync_keys(store.file_states()["/f"])) == 0


def test_provisional_nodes(archive_store: ArchiveTarget) -> None:
    """A file's open tail is replaced when its next sync no longer produces it, unless another
    file's tail holds it or an import made it permanent; a node already permanent is never
    made provisional."""
    root, partial, whole = text_node("q"), text_node("draft"), text_node("final")
    stored = lambda store: {n.hash for n in store}  # noqa: E731
    with archive(archive_store) as store:
        store.sync_file(
            update("/a", b"1", nodes=(root, partial), provisional=frozenset({partial.hash}))
        )
        store.sync_file(update("/b", b"1", nodes=(partial,), provisional=frozenset({partial.hash})))
        store.sync_file(update("/a", b"12", nodes=(whole,), provisional=frozenset({whole.hash})))
        assert partial.hash in stored(store)  # /b holds it
        store.sync_file(update("/b", b"12", nodes=(whole,), provisional=frozenset({whole.hash})))
        assert partial.hash not in stored(store)
        assert root.hash in stored(store)  # it was never provisional
        store.put(partial)  # an import: permanent
        store.sync_file(update("/c", b"1", nodes=(partial,), provisional=frozenset({partial.hash})))
        store.sync_file(update("/c", b"12", nodes=(whole,), provisional=frozenset({whole.hash})))
        assert partial.hash in stored(store)
        store.sync_file(update("/d", b"1", nodes=(whole,), provisional=frozenset({whole.hash})))
        store.put(whole)  # put makes the provisional node permanent for every file
        store.sync_file(update("/d", b"12", nodes=(), provisional=frozenset()))
        assert whole.hash in stored(store)


def test_stat_only_and_failed_updates_keep_the_tail(archive_store: ArchiveTarget) -> None:
    """An update that parsed nothing (``parsed=False``) leaves the file's nodes alone."""
    node = text_node("tail")
    with archive(archive_store) as store:
        store.sync_file(update("/a", b"1", nodes=(node,), provisional=frozenset({node.hash})))
        store.sync_file(update("/a", b"1", parsed=False, mtime_ns=9))
        assert node.hash in {n.hash for n in store}
        assert store.file_states()["/a"].mtime_ns == 9


def test_a_batch_is_one_transaction(archive_store: ArchiveTarget) -> None:
    """When one update of a batch cannot be written, nothing of the batch is kept."""
    with archive(archive_store) as store:
        bad = dataclasses.replace(update("/b", b"2"), path=None)  # files.path is NOT NULL
        with pytest.raises(NodeStoreError, match=r"cannot write (the )?node store"):
            store.sync_files([update("/a", b"1", nodes=(text_node("a"),)), bad])
        assert (len(store), store.file_states(), store.archived_files()) == (0, {}, [])


V1_SCHEMA = """
CREATE TABLE nodes (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, parent_hash TEXT,
                    role TEXT NOT NULL, bucket TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE INDEX nodes_parent ON nodes (parent_hash, seq);
PRAGMA user_version = 1;
"""


def test_version_1_store(tmp_path: Path) -> None:
    """A version 1 store: read as it is (no archive, its file not written), upgraded when
    opened for writing, its nodes kept."""
    db = tmp_path / "v1.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript(V1_SCHEMA)
    node = text_node("old")
    con.execute(
        "INSERT INTO nodes (hash, parent_hash, role, bucket, metadata) VALUES (?, NULL, ?, ?, ?)",
        (node.hash, "user", node.bucket.to_json().decode(), "{}"),
    )
    con.commit()
    con.close()
    before = db.read_bytes()
    reader = open_store(db, create=False)
    assert isinstance(reader, SQLiteNodeStore)
    with reader:
        assert (reader.schema_version, reader.file_states(), reader.archived_files()) == (1, {}, [])
        with pytest.raises(NodeStoreError, match="schema version 1 has no archive"):
            reader.sync_file(update("/f", b"x"))
        assert reader.get(node.hash) == node
    assert db.read_bytes() == before
    with sqlite_store(db) as writer:
        assert writer.schema_version == 2
        writer.sync_file(update("/f", b"x"))
        assert writer.file_states()["/f"].size == 1
        assert writer.get(node.hash) == node
