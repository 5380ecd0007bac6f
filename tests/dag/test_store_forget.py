"""Forgetting a node's content (issue 20 item 4): ``NodeStore.forget`` prunes a node, its id,
parent link and descendants stay, ``verify_store`` reports it ``pruned``; the SQLite store
and PostgreSQL stores keep the marker in a ``pruned`` table (schema version 2, migrated from
version 1)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from servers import ArchiveTarget

from merkle_memory.dag import Bucket, ContentBlock, Node
from merkle_memory.dag.store import NodeStore, SQLiteNodeStore, open_store, verify_store
from merkle_memory.errors import NodeNotFoundError, NodeStoreError

SECRET = "my card ends in 4242"


def _node(text: str, parent: Node | None = None, role: str = "user") -> Node:
    bucket = Bucket("message", role, (ContentBlock("text", text=text),), model="m-1")
    return Node.create(bucket, parent.hash if parent else None, {"uuid": text[:8]})


def _chain() -> list[Node]:
    """root -> secret -> reply -> (left, right)."""
    root = _node("hello")
    secret = _node(SECRET, root)
    reply = _node("noted", secret, "assistant")
    return [root, secret, reply, _node("left", reply), _node("right", reply)]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], NodeStore]]:
    """Each store; every store ``make()`` opens (but the in-memory one) shares its data."""
    opened: list[NodeStore] = []
    where: str | Path | None = {"memory": None, "sqlite": tmp_path / "nodes.db"}.get(request.param)
    if request.param == "postgres":
        where = request.getfixturevalue("postgres_url")

    def make() -> NodeStore:
        store = open_store(where)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_a_pruned_node_keeps_its_id_and_links_and_verifies_as_pruned(
    make_store: Callable[[], NodeStore],
) -> None:
    """After forget the node has no content but keeps its hash, parent, type, role, model and
    metadata; its descendants keep their ids and parents; verify is ok and lists it as
    pruned (never as a mismatch); ancestry through it is complete."""
    store = make_store()
    nodes = _chain()
    store.put_many(nodes)
    secret = nodes[1]
    assert store.forget(secret.hash, "user asked") is True
    got = store.get(secret.hash)
    assert got is not None
    assert (got.hash, got.parent_hash, got.bucket.content) == (secret.hash, nodes[0].hash, ())
    assert (got.bucket.type, got.bucket.role, got.bucket.model) == ("message", "user", "m-1")
    assert got.metadata == secret.metadata and not got.valid
    assert store.is_pruned(secret.hash) and not store.is_pruned(nodes[2].hash)
    for child in nodes[2:]:
        assert store.get(child.hash) == child
    report = verify_store(store)
    assert (report.ok, report.pruned, report.mismatches, report.nodes) == (
        True,
        (secret.hash,),
        (),
        5,
    )
    assert report.to_dict()["pruned"] == [secret.hash]
    ancestry = store.ancestry(nodes[4].hash)
    assert ancestry.complete and [n.hash for n in ancestry.nodes][-2:] == [
        secret.hash,
        nodes[0].hash,
    ]


def test_forgetting_again_or_putting_the_node_back_changes_nothing(
    make_store: Callable[[], NodeStore],
) -> None:
    """A second forget returns False; putting the original node again (a re-import) is a
    no-op for a known hash, so the content does not come back."""
    store = make_store()
    nodes = _chain()
    store.put_many(nodes)
    store.forget(nodes[1].hash)
    assert store.forget(nodes[1].hash) is False
    assert store.put(nodes[1]) is False
    assert store.put_many(nodes) == 0
    got = store.get(nodes[1].hash)
    assert got is not None and got.bucket.content == ()
    assert verify_store(store).pruned == (nodes[1].hash,)


def test_an_unknown_node_cannot_be_forgotten(make_store: Callable[[], NodeStore]) -> None:
    """``NodeNotFoundError`` for a hash the store does not hold."""
    store = make_store()
    store.put_many(_chain())
    with pytest.raises(NodeNotFoundError):
        store.forget("0" * 64)


def test_without_the_marker_an_emptied_node_is_a_mismatch(archive_store: ArchiveTarget) -> None:
    """The control: content removed by hand (no ``pruned`` row) is a hash mismatch, and a
    ``pruned`` row naming a node that still holds its content is reported unreadable."""
    db = archive_store.store
    nodes = _chain()
    with open_store(db) as store:
        store.put_many(nodes)
    empty = '{"content":[],"model":"m-1","role":"user","type":"message"}'
    archive_store.sql("UPDATE {nodes} SET bucket = ? WHERE hash = ?", empty, nodes[1].hash)
    archive_store.sql("INSERT INTO {pruned} VALUES (?, 'x', 'r')", nodes[2].hash)
    with open_store(db, create=False) as store:
        report = verify_store(store)
    assert [m.hash for m in report.mismatches] == [nodes[1].hash]
    assert [(u.hash, u.reason) for u in report.unreadable] == [
        (nodes[2].hash, "marked pruned but its bucket still holds content")
    ]
    assert (report.ok, report.pruned) == (False, ())


def test_the_forgotten_text_leaves_the_sqlite_files(tmp_path: Path) -> None:
    """SQLite keeps freed bytes unless told otherwise: after forget (secure_delete, WAL
    checkpointed and truncated) the text is in neither the database nor its WAL; before, it
    is (the control)."""
    db = tmp_path / "n.db"

    def on_disk() -> bytes:
        return b"".join(p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.is_file())

    nodes = _chain()
    with open_store(db) as store:
        store.put_many(nodes)
        assert SECRET.encode() in on_disk()
        store.forget(nodes[1].hash, "user asked")
        assert SECRET.encode() not in on_disk()
    assert SECRET.encode() not in on_disk()


def test_a_version_1_store_is_read_and_migrated_by_the_first_forget(tmp_path: Path) -> None:
    """A store written before version 2 (no ``pruned`` table) reads as having no pruned node,
    even read-only; the first forget adds the table and sets version 2 in its transaction."""
    db = tmp_path / "n.db"
    nodes = _chain()
    with open_store(db) as store:
        store.put_many(nodes)
    con = sqlite3.connect(db)
    with con:
        con.execute("DROP TABLE pruned")
        con.execute("PRAGMA user_version = 1")
    con.close()
    with open_store(db, create=False) as store:
        assert (verify_store(store).ok, verify_store(store).pruned) == (True, ())
        assert store.is_pruned(nodes[1].hash) is False
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 1
    with SQLiteNodeStore(db, create=False) as store:
        assert store.forget(nodes[1].hash) is True
        assert verify_store(store).pruned == (nodes[1].hash,)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    assert con.execute("SELECT hash, reason FROM pruned").fetchall() == [(nodes[1].hash, "")]
    con.close()


def test_a_reason_must_be_text(archive_store: ArchiveTarget) -> None:
    """A reason that is not a ``str`` is refused before anything is written."""
    with open_store(archive_store.store) as store:
        store.put_many(_chain())
        with pytest.raises(NodeStoreError, match="a reason is a string"):
            store.forget(_chain()[1].hash, 5)  # type: ignore[arg-type]
        assert verify_store(store).pruned == ()
