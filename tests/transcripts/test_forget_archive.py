"""``forget_node`` (``dag forget``) on a store that archives transcripts: the node is pruned
and every archived version of a file whose import gives it is deleted in the same
transaction, so the forgotten text is in neither the database file nor its WAL."""

from __future__ import annotations

import re
import sqlite3
import zlib
from pathlib import Path

import pytest
from support import cc_line

from merkle_memory.dag.store import SQLiteNodeStore, verify_store
from merkle_memory.errors import NodeStoreError
from merkle_memory.transcripts import ForgetResult, forget_node, import_file, sync_paths

SECRET = "hunter2secretpassword"


def session(tag: str, secret: bool) -> str:
    """A four-line Claude Code session; its second user turn holds the secret or not."""
    second = f"my password is {SECRET}" if secret else "nothing to hide here"
    lines = [
        cc_line(f"{tag}1", None, "user", f"hello from {tag}"),
        cc_line(f"{tag}2", f"{tag}1", "assistant", "hi"),
        cc_line(f"{tag}3", f"{tag}2", "user", second),
        cc_line(f"{tag}4", f"{tag}3", "assistant", "noted"),
    ]
    return "".join(line + "\n" for line in lines)


def on_disk(folder: Path) -> bytes:
    """The bytes of the store's files (database, WAL, shared memory)."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def chunk_blobs(db: Path) -> list[bytes]:
    con = sqlite3.connect(db)
    try:
        return [bytes(row[0]) for row in con.execute("SELECT data FROM chunks")]
    finally:
        con.close()


def test_forget_purges_every_archived_version_that_gives_the_node(tmp_path: Path) -> None:
    """Two files give the secret node (a and its copy c), one does not (b): forget purges
    a and c (their shared chunk deleted, b's kept), the compressed and the raw text are in
    neither file of the store, restore of a purged version says why, and b still restores."""
    sessions, store_dir = tmp_path / "t", tmp_path / "store"
    sessions.mkdir()
    store_dir.mkdir()
    a, b, c = sessions / "a.jsonl", sessions / "b.jsonl", sessions / "c.jsonl"
    a.write_text(session("a", secret=True))
    c.write_text(session("a", secret=True))
    b.write_text(session("b", secret=False))
    secret_node = next(
        n for n in import_file(a).nodes if any(SECRET in (x.text or "") for x in n.bucket.content)
    )
    db = store_dir / "s.db"
    with SQLiteNodeStore(db) as store:
        sync_paths([sessions], store)
        blob = zlib.compress(a.read_bytes(), 6)
        assert blob in on_disk(store_dir)  # the control: the archived chunk is there
        result = forget_node(store, secret_node.hash, "pasted a password")
        assert result == ForgetResult(secret_node.hash, True, ((str(a), 1), (str(c), 1)))
        assert store.archived_versions() == [(str(b), "claude-code", 1)]
        with pytest.raises(NodeStoreError) as caught:
            b"".join(store.archived_bytes(str(a)))
        assert re.fullmatch(
            rf"version 1 of {re.escape(str(a))} was purged by dag forget of node "
            rf"{secret_node.hash} at \d{{4}}-\d\d-\d\dT[\d:.]+Z, reason: pasted a password: "
            r"its bytes are gone",
            str(caught.value),
        )
        assert b"".join(store.archived_bytes(str(b))) == b.read_bytes()
        assert verify_store(store).pruned == (secret_node.hash,)
        assert forget_node(store, secret_node.hash) == ForgetResult(secret_node.hash, False, ())
    disk = on_disk(store_dir)
    assert blob not in disk and SECRET.encode() not in disk
    assert all(SECRET.encode() not in zlib.decompress(data) for data in chunk_blobs(db))
    assert len(chunk_blobs(db)) == 1  # b's chunk only


def test_a_purged_file_still_on_disk_is_archived_again_when_synced(tmp_path: Path) -> None:
    """The transcript file is not touched: a purged latest version makes the next sync of
    the file archive it whole as version 2 (the documented limit); the node stays pruned."""
    sessions = tmp_path / "t"
    sessions.mkdir()
    a = sessions / "a.jsonl"
    a.write_text(session("a", secret=True))
    db = tmp_path / "s.db"
    with SQLiteNodeStore(db) as store:
        sync_paths([sessions], store)
        node = import_file(a).nodes[2]
        assert forget_node(store, node.hash).purged == ((str(a), 1),)
        report = sync_paths([sessions], store)
        assert (report.updated_files, report.new_nodes) == (1, 0)
        assert [(f.version, f.versions) for f in store.archived_files()] == [(2, 2)]
        assert b"".join(store.archived_bytes(str(a))) == a.read_bytes()
        assert store.is_pruned(node.hash) and store.get(node.hash).bucket.content == ()  # type: ignore[union-attr]


def test_store_forget_on_an_archive_needs_purge(tmp_path: Path) -> None:
    """``SQLiteNodeStore.forget`` without ``purge`` is refused on a store that archives
    files (nothing changes); ``purge=()`` prunes and keeps the archive."""
    sessions = tmp_path / "t"
    sessions.mkdir()
    a = sessions / "a.jsonl"
    a.write_text(session("a", secret=True))
    with SQLiteNodeStore(tmp_path / "s.db") as store:
        sync_paths([sessions], store)
        node = import_file(a).nodes[2]
        with pytest.raises(NodeStoreError, match=r"archives transcripts \(dag sync\)"):
            store.forget(node.hash)
        assert store.is_pruned(node.hash) is False
        assert store.forget(node.hash, purge=()) is True
        assert b"".join(store.archived_bytes(str(a))) == a.read_bytes()
        with pytest.raises(NodeStoreError, match="no version 5 of"):
            store.forget(import_file(a).nodes[1].hash, purge=[(str(a), 5)])
        assert store.is_pruned(import_file(a).nodes[1].hash) is False
