"""The PostgreSQL node store beyond the interface tests it shares with the others (test_store,
test_store_forget, test_archive): what it keeps in its tables, atomic imports and forgets,
schema refusal, the migration from schema version 1, and verify on tampered rows.

Needs the test server (tests/servers.py): skipped without it, failed under CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from servers import admin, with_search_path

from merkle_memory import canonical
from merkle_memory.dag import Bucket, ContentBlock, Node, node_hash
from merkle_memory.dag.store import PostgresNodeStore, open_store, verify_store
from merkle_memory.errors import NodeNotFoundError, NodeStoreError


def text_node(text: str, parent: Node | None = None, role: str = "user") -> Node:
    return Node.create(Bucket("message", role, (ContentBlock("text", text=text),)),
                       parent.hash if parent else None)  # fmt: skip


def tree() -> list[Node]:
    """root -> a -> (b, c); c -> d."""
    root = text_node("hello world")
    a = text_node("Hi", root, "assistant")
    b, c = text_node("left", a), text_node("right", a)
    return [root, a, b, c, text_node("deeper", c, "assistant")]


def _sql(url: str, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    with admin(url) as conn:
        cursor = conn.execute(statement, args)
        return cursor.fetchall() if cursor.description else []


def test_open_store_gives_a_postgres_store_holding_canonical_rows(postgres_url: str) -> None:
    """open_store(URL) is the PostgreSQL store; its rows hold the RFC 8785 bucket (unprojected),
    the role and the parent, in insertion order, and survive a new connection."""
    nodes = tree()
    tagged = text_node("<system-reminder>x</system-reminder>hello again")
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresNodeStore)
        assert store.put_many([*nodes, tagged]) == 6
    rows = _sql(postgres_url, "SELECT hash, parent_hash, role, bucket FROM mm_nodes ORDER BY seq")
    assert [r[0] for r in rows] == [n.hash for n in [*nodes, tagged]]
    assert rows[5][1:] == (None, b"user", canonical.dumps(tagged.bucket.to_dict()).decode())
    assert rows[1][1:3] == (nodes[0].hash, b"assistant")
    with open_store(postgres_url, create=False) as store:
        assert [n.hash for n in store.roots()] == [nodes[0].hash, tagged.hash]
        assert verify_store(store).ok


def test_put_many_is_one_transaction(postgres_url: str) -> None:
    """An exception in the middle of put_many leaves no node of that call in the database."""
    nodes = tree()

    def gen() -> Iterator[Node]:
        yield nodes[0]
        yield nodes[1]
        raise RuntimeError("killed")

    with open_store(postgres_url) as store:
        with pytest.raises(RuntimeError):
            store.put_many(gen())
        assert len(store) == 0
        assert store.put_many(nodes) == 5
    assert _sql(postgres_url, "SELECT count(*) FROM mm_nodes") == [(5,)]


def test_a_role_with_a_nul_is_kept(postgres_url: str) -> None:
    """A role holding a NUL (which PostgreSQL text cannot hold) is stored and read back."""
    node = text_node("x", role="us\x00er")
    with open_store(postgres_url) as store:
        store.put(node)
        assert store.get(node.hash) == node
        assert verify_store(store).ok


def test_reading_never_installs_a_schema(postgres_url: str) -> None:
    """open_store(URL, create=False) on a database without the schema is refused and creates
    no table; a URL with a fragment (a tenant) is refused as a node store."""
    with pytest.raises(NodeStoreError, match="no node store"):
        open_store(postgres_url, create=False)
    # this test's own schema (the URL's search_path): other workers create tables meanwhile
    tables = (
        "SELECT count(*) FROM pg_tables"
        " WHERE schemaname = current_schema() AND tablename LIKE 'mm\\_%%'"
    )
    assert _sql(postgres_url, tables) == [(0,)]
    assert _sql(postgres_url, "SELECT current_schema() LIKE 'mm\\_test\\_%%'") == [(True,)]
    with pytest.raises(NodeStoreError, match="drop '#cc'"):
        open_store(postgres_url + "#cc")


def test_other_schema_version_refused(postgres_url: str) -> None:
    """A database whose node store schema has another version is refused."""
    open_store(postgres_url).close()
    _sql(postgres_url, "UPDATE mm_schema SET version = 7 WHERE component = 'nodes'")
    with pytest.raises(NodeStoreError, match="schema version 7"):
        open_store(postgres_url)


def test_unreachable_server_is_a_node_store_error(postgres_url: str) -> None:
    """A URL naming a socket folder with no server raises NodeStoreError (no traceback of the
    driver), without the password."""
    with pytest.raises(NodeStoreError, match="cannot connect") as caught:
        open_store("postgresql://u:secret@/db?host=/nonexistent-socket-dir")
    assert "secret" not in str(caught.value)


def test_verify_reports_tampered_rows(postgres_url: str) -> None:
    """verify_store recomputes every hash from the stored rows: a forged bucket is a mismatch,
    a rewritten parent makes a cycle, a wrong role column is unreadable."""
    root, a, _b, c, d = tree()
    with open_store(postgres_url) as store:
        store.put_many(tree())
    forged = Bucket("message", "user", (ContentBlock("text", text="Bye"),))
    _sql(postgres_url, "UPDATE mm_nodes SET bucket = %s WHERE hash = %s",
         canonical.dumps(forged.to_dict()).decode(), c.hash)  # fmt: skip
    _sql(postgres_url, "UPDATE mm_nodes SET parent_hash = %s WHERE hash = %s", d.hash, a.hash)
    _sql(postgres_url, "UPDATE mm_nodes SET role = 'system' WHERE hash = %s", root.hash)
    with open_store(postgres_url) as store:
        report = verify_store(store)
        assert store.ancestry(d.hash).cycle
    assert report.cycles == ((a.hash, d.hash, c.hash),)
    assert {(m.hash, m.computed) for m in report.mismatches} == {
        (a.hash, node_hash(a.bucket, d.hash)),
        (c.hash, node_hash(forged, a.hash)),
    }
    assert report.to_dict()["unreadable"] == [
        {"hash": root.hash,
         "reason": "stored role 'system' differs from the bucket's role 'user'"}
    ]  # fmt: skip


def test_stores_in_two_schemas_are_separate(postgres_url: str) -> None:
    """Two schemas of one database hold two separate stores (a URL's search_path)."""
    other = postgres_url.rsplit("options=", 1)[0] + "options=-csearch_path%3Dmm_other_store"
    _sql(postgres_url, "CREATE SCHEMA IF NOT EXISTS mm_other_store")
    try:
        with open_store(postgres_url) as one, open_store(other) as two:
            one.put_many(tree())
            assert (len(one), len(two)) == (5, 0)
    finally:
        _sql(postgres_url, "DROP SCHEMA mm_other_store CASCADE")
    assert with_search_path("postgresql:///x?host=/s", "y") == (
        "postgresql:///x?host=/s&options=-csearch_path%3Dy"
    )


V1_TABLES = """
CREATE TABLE mm_schema (component text PRIMARY KEY, version integer NOT NULL);
CREATE TABLE mm_nodes (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hash text COLLATE "C" NOT NULL UNIQUE, parent_hash text COLLATE "C",
    role bytea NOT NULL, bucket text NOT NULL, metadata text NOT NULL
);
CREATE INDEX mm_nodes_parent ON mm_nodes (parent_hash, seq);
INSERT INTO mm_schema VALUES ('nodes', 1);
"""
"""The schema version 1 of the PostgreSQL node store (as the library released it)."""


def _version_1(url: str) -> list[Node]:
    """A database holding a version 1 store with the nodes of ``tree()``."""
    nodes = tree()
    with admin(url) as conn:
        conn.execute(V1_TABLES)
        for node in nodes:
            conn.execute(
                "INSERT INTO mm_nodes (hash, parent_hash, role, bucket, metadata)"
                " VALUES (%s, %s, %s, %s, %s)",
                (node.hash, node.parent_hash, node.bucket.role.encode(),
                 node.bucket.to_json().decode(), "{}"),
            )  # fmt: skip
    return nodes


def _tables(url: str) -> list[str]:
    rows = _sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    return sorted(str(row[0]) for row in rows)


def test_a_version_1_database_is_read_as_it_is_and_upgraded_for_writing(
    postgres_url: str,
) -> None:
    """Schema version 1 (nodes only): opened for reading it is left as it is (no table
    added, version 1) and reads as a store with nothing archived and no pruned node; opened
    for writing it is upgraded to version 2 in one step, every node kept, and syncs."""
    nodes = _version_1(postgres_url)
    with open_store(postgres_url, create=False) as store:
        assert isinstance(store, PostgresNodeStore)
        assert (store.schema_version, store.archived_files(), store.file_states()) == (1, [], {})
        assert store.is_pruned(nodes[0].hash) is False
        report = verify_store(store)
        assert (report.ok, report.nodes, report.pruned) == (True, 5, ())
        with pytest.raises(NodeStoreError, match="schema version 1 has no archive"):
            b"".join(store.archived_bytes("/f"))
    assert _tables(postgres_url) == ["mm_nodes", "mm_schema"]
    assert _sql(postgres_url, "SELECT version FROM mm_schema") == [(1,)]
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresNodeStore)
        assert store.schema_version == 2
        assert [n.hash for n in store] == [n.hash for n in nodes]
    assert _sql(postgres_url, "SELECT version FROM mm_schema") == [(2,)]
    assert _tables(postgres_url) == sorted(
        f"mm_{t}" for t in ("chunks", "file_chunks", "files", "nodes", "provisional", "pruned",
                            "purged_versions", "schema", "sync_keys", "versions")
    )  # fmt: skip


def test_a_version_1_database_is_upgraded_by_the_first_forget(postgres_url: str) -> None:
    """A store opened for reading at version 1 (``dag forget`` opens it so) is upgraded by
    its first forget, inside the forget's transaction; a forget that fails (unknown node)
    leaves version 1 and no new table."""
    nodes = _version_1(postgres_url)
    with open_store(postgres_url, create=False) as store:
        with pytest.raises(NodeNotFoundError):
            store.forget("0" * 64)
        assert _sql(postgres_url, "SELECT version FROM mm_schema") == [(1,)]
        assert _tables(postgres_url) == ["mm_nodes", "mm_schema"]
        assert store.forget(nodes[1].hash, "r\x00why") is True
        assert verify_store(store).pruned == (nodes[1].hash,)
    assert _sql(postgres_url, "SELECT version FROM mm_schema") == [(2,)]
    assert _sql(postgres_url, "SELECT hash, reason FROM mm_pruned") == [
        (nodes[1].hash, b"r\x00why")
    ]


def test_a_forget_is_one_transaction(postgres_url: str) -> None:
    """A forget whose purge names an unknown archived version changes nothing: the node keeps
    its content, the archive its bytes (the prune and the purge commit together)."""
    nodes = tree()
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresNodeStore)
        store.put_many(nodes)
        with pytest.raises(NodeStoreError, match="no archived file /nope"):
            store.forget(nodes[1].hash, "x", purge=[("/nope", 1)])
        assert (store.is_pruned(nodes[1].hash), store.get(nodes[1].hash)) == (False, nodes[1])
        assert _sql(postgres_url, "SELECT count(*) FROM mm_pruned") == [(0,)]
