"""Node stores: in-memory, SQLite and PostgreSQL, put/get/children/ancestry/roots/leaves/load_dag,
verify (the PostgreSQL case needs the test server, see tests/servers.py)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.dag import Bucket, ContentBlock, Node, node_hash
from merkle_memory.dag.store import MemoryNodeStore, NodeStore, open_store, verify_store
from merkle_memory.errors import NodeNotFoundError, NodeStoreError

# Vectors of tests/assets/tapes/node_vectors.json, repeated here as the expected values of
# nodes built from their inputs (the vector file itself is checked in test_projection.py).
ROOT_HASH = "7d3a447a18e3f3a102967dde0d802d512f69383907c3d32a48d10058a1f55950"
CHILD_HASH = "3a411d83ddead4f370038cc32de61e8f1d93526f2c3ce6893f36df1d266cec9f"


def text_node(text: str, parent: Node | None = None, role: str = "user", **meta: str) -> Node:
    bucket = Bucket("message", role, (ContentBlock("text", text=text),))
    return Node.create(bucket, parent.hash if parent else None, meta)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], NodeStore]]:
    """Each backend; every store ``make()`` opens (but the in-memory one) shares its data."""
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


def tree() -> list[Node]:
    """root -> a -> (b, c); c -> d. Insertion order: root, a, b, c, d."""
    root = text_node("hello world")
    a = text_node("Hi", root, "assistant")
    b = text_node("left", a)
    c = text_node("right", a)
    d = text_node("deeper", c, "assistant")
    return [root, a, b, c, d]


def test_put_is_idempotent_and_reports_insertion(make_store: Callable[[], NodeStore]) -> None:
    """put returns True the first time, False for a hash already stored; len counts once."""
    store = make_store()
    root = text_node("hello world")
    assert root.hash == ROOT_HASH
    assert store.put(root) is True
    assert store.put(root) is False
    assert len(store) == 1
    assert store.put_many(tree()) == 4
    assert store.put_many(tree()) == 0
    assert len(store) == 5


def test_get_round_trips_bucket_and_metadata(make_store: Callable[[], NodeStore]) -> None:
    """A stored node reads back equal: bucket (model included), parent and metadata."""
    store = make_store()
    root = text_node("hello world")
    bucket = Bucket(
        "message",
        "assistant",
        (
            ContentBlock("text", text="Hi"),
            ContentBlock("tool_use", tool_use_id="t1", tool_name="Bash", tool_input={"n": 2.5}),
        ),
        model="claude-x",
        provider="anthropic",
    )
    child = Node.create(bucket, root.hash, {"uuid": "u-1", "parent_tool_use_id": "toolu_9"})
    store.put_many([root, child])
    got = store.get(child.hash)
    assert got == child
    assert got is not None and got.metadata == {"uuid": "u-1", "parent_tool_use_id": "toolu_9"}
    assert store.get("0" * 64) is None
    assert child.hash in store and "0" * 64 not in store


def test_children_roots_leaves_in_insertion_order(make_store: Callable[[], NodeStore]) -> None:
    """children, roots and leaves come in insertion order."""
    store = make_store()
    root, a, b, c, d = tree()
    other = text_node("second root")
    store.put_many([root, a, b, other, c, d])
    assert [n.hash for n in store.children(a.hash)] == [b.hash, c.hash]
    assert store.children(d.hash) == []
    assert [n.hash for n in store.roots()] == [root.hash, other.hash]
    assert [n.hash for n in store.leaves()] == [b.hash, other.hash, d.hash]
    assert [n.hash for n in store] == [root.hash, a.hash, b.hash, other.hash, c.hash, d.hash]


def test_ancestry_node_first(make_store: Callable[[], NodeStore]) -> None:
    """ancestry lists the node itself first and the root last, and is complete."""
    store = make_store()
    root, a, _b, c, d = tree()
    store.put_many(tree())
    found = store.ancestry(d.hash)
    assert [n.hash for n in found.nodes] == [d.hash, c.hash, a.hash, root.hash]
    assert found.complete and found.missing_parent is None and not found.cycle
    assert a.hash == CHILD_HASH


def test_ancestry_reports_missing_parent(make_store: Callable[[], NodeStore]) -> None:
    """A node whose parent is absent: the walk stops and names the missing parent."""
    store = make_store()
    _root, a, _b, c, d = tree()
    store.put_many([c, d])  # a (c's parent) never stored
    found = store.ancestry(d.hash)
    assert [n.hash for n in found.nodes] == [d.hash, c.hash]
    assert found.missing_parent == a.hash
    assert not found.complete
    with pytest.raises(NodeStoreError, match="missing"):
        store.load_dag(d.hash)


def test_ancestry_unknown_node(make_store: Callable[[], NodeStore]) -> None:
    """ancestry and load_dag of an unknown hash raise NodeNotFoundError (a LookupError)."""
    store = make_store()
    with pytest.raises(NodeNotFoundError):
        store.ancestry("ab" * 32)
    with pytest.raises(LookupError):
        store.load_dag("ab" * 32)


def test_load_dag_tapes_semantics(make_store: Callable[[], NodeStore]) -> None:
    """load_dag(h): ancestry root-first, then all descendants of h; siblings off the path out."""
    store = make_store()
    root, a, b, c, d = tree()
    store.put_many(tree())
    dag = store.load_dag(c.hash)
    assert [n.hash for n in dag] == [root.hash, a.hash, c.hash, d.hash]
    assert b.hash not in dag
    full = store.load_dag(root.hash)
    assert [n.hash for n in full] == [root.hash, a.hash, b.hash, c.hash, d.hash]
    assert len(store.load_dag(b.hash)) == 3


def test_resolve_prefix(make_store: Callable[[], NodeStore]) -> None:
    """resolve maps a unique hex prefix to the full hash; unknown and bad prefixes raise."""
    store = make_store()
    store.put_many(tree())
    assert store.resolve(ROOT_HASH[:8]) == ROOT_HASH
    assert store.resolve(ROOT_HASH) == ROOT_HASH
    with pytest.raises(NodeNotFoundError):
        store.resolve("ffffffff" if not ROOT_HASH.startswith("ffff") else "00000000")
    with pytest.raises(NodeStoreError, match="hash prefix"):
        store.resolve("xyz!")


def test_verify_clean_store(make_store: Callable[[], NodeStore]) -> None:
    """A store filled by put_many verifies ok, with node and root counts."""
    store = make_store()
    store.put_many([*tree(), text_node("second root")])
    report = verify_store(store)
    assert report.ok
    assert report.to_dict() == {
        "ok": True,
        "nodes": 6,
        "roots": 2,
        "mismatches": [],
        "unreadable": [],
        "dangling": [],
        "cycles": [],
    }


def test_verify_reports_dangling(make_store: Callable[[], NodeStore]) -> None:
    """A node whose parent is absent is reported dangling, and the report is not ok."""
    store = make_store()
    _root, a, _b, c, d = tree()
    store.put_many([c, d])
    report = verify_store(store)
    assert not report.ok
    assert [(x.hash, x.parent_hash) for x in report.dangling] == [(c.hash, a.hash)]
    assert report.mismatches == () and report.cycles == ()


# --- SQLite specifics ------------------------------------------------------------------------


def _tamper(db: Path, sql: str, *args: object) -> None:
    con = sqlite3.connect(db)
    with con:
        con.execute(sql, args)
    con.close()


def test_sqlite_persists_across_opens(tmp_path: Path) -> None:
    """Nodes written by one SQLiteNodeStore are read back by a new one on the same file."""
    db = tmp_path / "n.db"
    with open_store(db) as store:
        store.put_many(tree())
    with open_store(db, create=False) as store:
        assert len(store) == 5
        assert [n.hash for n in store.roots()] == [ROOT_HASH]
        assert verify_store(store).ok


def test_sqlite_journal_is_wal(tmp_path: Path) -> None:
    """The store uses the WAL journal and records its schema version."""
    db = tmp_path / "n.db"
    open_store(db).close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # version 2 adds the pruned table (issue 20) and the archive of dag sync (issue 17)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    con.close()


def test_sqlite_stores_canonical_bucket(tmp_path: Path) -> None:
    """The bucket column holds the RFC 8785 bytes of Bucket.to_dict() (unprojected)."""
    db = tmp_path / "n.db"
    node = text_node("<system-reminder>x</system-reminder>hello world")
    with open_store(db) as store:
        store.put(node)
    con = sqlite3.connect(db)
    stored = con.execute("SELECT bucket, role, parent_hash FROM nodes").fetchone()
    con.close()
    assert stored == (canonical.dumps(node.bucket.to_dict()).decode(), "user", None)
    assert node.hash == ROOT_HASH  # the projection removed the tag from the hash only


def test_sqlite_put_many_is_atomic(tmp_path: Path) -> None:
    """An exception in the middle of put_many rolls the whole call back."""
    db = tmp_path / "n.db"
    nodes = tree()

    def gen() -> Iterator[Node]:
        yield nodes[0]
        yield nodes[1]
        raise RuntimeError("killed")

    with open_store(db) as store:
        with pytest.raises(RuntimeError):
            store.put_many(gen())
        assert len(store) == 0
        assert store.put_many(nodes) == 5


def test_sqlite_missing_file_refused_without_create(tmp_path: Path) -> None:
    """open_store(create=False) on a missing file raises NodeStoreError and creates nothing."""
    with pytest.raises(NodeStoreError, match="no node store"):
        open_store(tmp_path / "absent.db", create=False)
    assert not (tmp_path / "absent.db").exists()


def test_sqlite_not_a_database(tmp_path: Path) -> None:
    """A file that is not SQLite raises NodeStoreError, not sqlite3.DatabaseError."""
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database at all, just text" * 50)
    with pytest.raises(NodeStoreError):
        open_store(bad)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", ["empty", "text", "foreign-sqlite"])
def test_sqlite_reading_open_never_writes_a_schema(tmp_path: Path, kind: str) -> None:
    """open_store(create=False) on an existing file that is not a node store (empty, not
    SQLite, another application's SQLite database) raises NodeStoreError and leaves the folder
    byte for byte as it was: no schema, no journal mode change, no -wal file."""
    db = tmp_path / "x.db"
    if kind == "empty":
        db.write_bytes(b"")
    elif kind == "text":
        db.write_bytes(b"hello, not a database\n" * 100)
    else:
        connection = sqlite3.connect(db)
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.commit()
        connection.close()
    before = _snapshot(tmp_path)
    with pytest.raises(NodeStoreError):
        open_store(db, create=False)
    assert _snapshot(tmp_path) == before


def test_sqlite_empty_file_becomes_a_store_when_creating(tmp_path: Path) -> None:
    """An existing empty file is a fine place for a new store when creating (dag import)."""
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    with open_store(db) as store:
        assert len(store) == 0
    with open_store(db, create=False) as store:
        assert len(store) == 0


def test_sqlite_other_schema_version_refused(tmp_path: Path) -> None:
    """A store with another schema version is refused."""
    db = tmp_path / "n.db"
    open_store(db).close()
    _tamper(db, "PRAGMA user_version = 7")
    with pytest.raises(NodeStoreError, match="schema version 7"):
        open_store(db)


def test_verify_detects_tampered_bucket(tmp_path: Path) -> None:
    """Editing a stored bucket is a hash mismatch naming the stored and computed hashes."""
    db = tmp_path / "n.db"
    root, a, *_ = tree()
    with open_store(db) as store:
        store.put_many(tree())
    forged = Bucket("message", "assistant", (ContentBlock("text", text="Bye"),))
    _tamper(
        db,
        "UPDATE nodes SET bucket = ? WHERE hash = ?",
        canonical.dumps(forged.to_dict()).decode(),
        a.hash,
    )
    with open_store(db) as store:
        report = verify_store(store)
    assert not report.ok
    assert [(m.hash, m.computed) for m in report.mismatches] == [
        (a.hash, node_hash(forged, root.hash))
    ]


def test_verify_detects_unreadable_bucket_and_bad_hash(tmp_path: Path) -> None:
    """A bucket that is not JSON and a hash that is not hex are mismatches, not crashes."""
    db = tmp_path / "n.db"
    _root, a, b, *_ = tree()
    with open_store(db) as store:
        store.put_many(tree())
    _tamper(db, "UPDATE nodes SET bucket = '{not json' WHERE hash = ?", a.hash)
    _tamper(db, "UPDATE nodes SET hash = 'zz' WHERE hash = ?", b.hash)
    with open_store(db) as store:
        report = verify_store(store)
    reasons = {m.hash: m.reason for m in report.mismatches}
    assert set(reasons) == {a.hash, "zz"}
    assert "unreadable" in reasons[a.hash]
    assert "hex" in reasons["zz"]


def test_verify_and_ancestry_detect_cycle(tmp_path: Path) -> None:
    """Parent links rewritten into a cycle: verify lists it, ancestry stops instead of looping."""
    db = tmp_path / "n.db"
    root, a, _b, c, d = tree()
    with open_store(db) as store:
        store.put_many(tree())
    _tamper(db, "UPDATE nodes SET parent_hash = ? WHERE hash = ?", d.hash, a.hash)
    with open_store(db) as store:
        found = store.ancestry(d.hash)
        assert found.cycle and not found.complete
        assert [n.hash for n in found.nodes] == [d.hash, c.hash, a.hash]
        report = verify_store(store)
    assert report.cycles == ((a.hash, d.hash, c.hash),)
    assert {m.hash for m in report.mismatches} == {a.hash}  # its parent changed
    assert root.hash not in {m.hash for m in report.mismatches}


def test_verify_self_parent_is_a_cycle() -> None:
    """A node naming itself as parent is a cycle of length one."""
    node = text_node("x")
    looped = Node(node.hash, node.hash, node.bucket)
    report = verify_store(MemoryNodeStore([looped]))
    assert report.cycles == ((node.hash,),)
    assert len(report.mismatches) == 1


# --- properties ------------------------------------------------------------------------------


def _naive_cycles(parents: dict[str, str | None]) -> set[frozenset[str]]:
    """Reference: a node is on a cycle iff following parents from it comes back to it."""
    found = set()
    for start in parents:
        seen = []
        current: str | None = start
        while current in parents and current not in seen:
            seen.append(current)
            current = parents[current]
        if current == start:
            found.add(frozenset(seen))
    return found


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-1, max_value=11), min_size=1, max_size=12))
def test_cycle_finder_matches_naive(links: list[int]) -> None:
    """The O(n) cycle finder finds exactly the cycles of a naive per-node walk."""
    from merkle_memory.dag._store_verify import _find_cycles

    names = [f"{i:064x}" for i in range(len(links))]
    parents: dict[str, str | None] = {}
    for i, link in enumerate(links):
        if link < 0:
            parents[names[i]] = None
        elif link < len(names):
            parents[names[i]] = names[link]
        else:
            parents[names[i]] = "f" * 64  # dangling
    assert {frozenset(c) for c in _find_cycles(parents)} == _naive_cycles(parents)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=25))
def test_stores_agree_with_each_other(parents: list[int]) -> None:
    """Random trees: memory and SQLite stores give the same roots, leaves and ancestries."""
    nodes: list[Node] = []
    for i, p in enumerate(parents):
        parent = nodes[p] if p < len(nodes) and i > 0 else None
        nodes.append(text_node(f"n{i}", parent, "user" if i % 2 else "assistant"))
    mem = MemoryNodeStore(nodes)
    sql = open_store(":memory:")
    try:
        sql.put_many(nodes)
        assert [n.hash for n in mem.roots()] == [n.hash for n in sql.roots()]
        assert [n.hash for n in mem.leaves()] == [n.hash for n in sql.leaves()]
        for node in nodes:
            assert mem.ancestry(node.hash) == sql.ancestry(node.hash)
            assert [n.hash for n in mem.load_dag(node.hash)] == [
                n.hash for n in sql.load_dag(node.hash)
            ]
        assert verify_store(sql).ok
    finally:
        sql.close()


# --- rows that verify must read back (dag verify and dag show agree) ---------------------------


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("metadata", "xx", "metadata: not JSON: Expecting value at offset 0"),
        ("metadata", "[]", "row: node metadata must be a JSON object"),
        ("metadata", 42, "row: node metadata must be a JSON object"),
        ("metadata", '{"a":NaN}', "metadata: NaN is not a JSON number (RFC 8785 §3.2.2.3)"),
        ("role", "system", "stored role 'system' differs from the bucket's role 'assistant'"),
    ],
)
def test_verify_reports_rows_get_cannot_read(
    tmp_path: Path, column: str, value: object, reason: str
) -> None:
    """A tampered column that is not hashed (metadata, role) leaves the hash valid, but the
    row is reported unreadable (report not ok), with the reason get gives; get itself fails
    on every such row except a wrong role (the bucket's role is the one read)."""
    db = tmp_path / "n.db"
    _root, a, *_ = tree()
    with open_store(db) as store:
        store.put_many(tree())
    _tamper(db, f"UPDATE nodes SET {column} = ? WHERE hash = ?", value, a.hash)
    with open_store(db) as store:
        report = verify_store(store)
        assert not report.ok
        assert report.mismatches == () and report.dangling == () and report.cycles == ()
        assert report.to_dict()["unreadable"] == [{"hash": a.hash, "reason": reason}]
        if column == "role":
            assert store.get(a.hash) == a
        else:
            with pytest.raises(NodeStoreError) as caught:
                store.get(a.hash)
            assert str(caught.value) == f"stored node {a.hash!r} cannot be read: {reason}"


def test_unreadable_bucket_is_reported_once(tmp_path: Path) -> None:
    """A bucket that does not parse is one mismatch (computed null), not also unreadable."""
    db = tmp_path / "n.db"
    _root, a, *_ = tree()
    with open_store(db) as store:
        store.put_many(tree())
    _tamper(db, "UPDATE nodes SET bucket = 'x', metadata = 'x' WHERE hash = ?", a.hash)
    with open_store(db) as store:
        report = verify_store(store)
    assert [(m.hash, m.computed) for m in report.mismatches] == [(a.hash, None)]
    assert report.unreadable == ()


_COLUMNS = ("hash", "parent_hash", "role", "bucket", "metadata")
_VALUES = st.one_of(
    st.sampled_from(["", "xx", "{}", "[]", "null", '{"a":1}', "user", "assistant", ROOT_HASH]),
    st.sampled_from(["f" * 64, "F" * 64, '{"type":"message","role":"user","content":[]}']),
    st.integers(-2, 2),
    st.none(),
    st.text(max_size=8),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(_COLUMNS), _VALUES), max_size=3))
def test_verify_ok_means_every_row_reads_back(edits: list[tuple[int, str, object]]) -> None:
    """Random edits of any stored column: the store verifies only if get reads every stored
    hash back as a valid node whose parent is stored (naive reference: get each row)."""
    nodes = tree()
    store = open_store(":memory:")
    try:
        store.put_many(nodes)
        db = store._db  # type: ignore[attr-defined]
        for index, column, value in edits:
            # A duplicate hash or a NULL where NOT NULL holds: SQLite refuses the edit.
            with contextlib.suppress(sqlite3.IntegrityError):
                db.execute(f"UPDATE nodes SET {column} = ? WHERE seq = ?", (value, index + 1))
        hashes = [row[0] for row in db.execute("SELECT hash FROM nodes ORDER BY seq")]
        readable = True
        for stored in hashes:
            try:
                node = store.get(stored)
            except NodeStoreError:
                readable = False
                continue
            roles = db.execute("SELECT role FROM nodes WHERE hash = ?", (stored,)).fetchone()
            readable &= (
                node is not None
                and node.valid
                and roles[0] == node.bucket.role
                and (node.parent_hash is None or node.parent_hash in hashes)
            )
        report = verify_store(store)
        assert report.ok == readable
    finally:
        store.close()


def test_an_empty_store_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty path is a ``NodeStoreError`` (not a raw ValueError), and nothing is created in
    the working folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NodeStoreError) as caught:
        open_store("")
    assert str(caught.value) == "node store path is empty (give a file name, a URL or None)"
    assert list(tmp_path.iterdir()) == []
