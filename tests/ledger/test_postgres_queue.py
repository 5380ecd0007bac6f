"""The append queue of a PostgreSQL tenant (schema version 2): a group commit in the database.

* The fragments a writer sends rebuild, at any seq after any prev, exactly the lines and hashes
  ``build_entries`` makes (a naive reference of the server's composition, under hypothesis).
* Appends through the queue write the very bytes a folder ledger writes, ids needing escapes
  and astral characters included.
* Writers that find the queue lock held wait, and one leader sequences them all in one
  transaction (one synchronous commit): every line of the batch has the same ``xmin``.
* A head row not as an append left it, or a rollback, sends the append down the lock path,
  which refuses the rollback and repairs the rest; nothing is left in the queue.
* A version 1 database is read as it is and upgraded in place by the first write; a later
  version is refused.
* The queue is used in one call (the procedure ``mm_append``, component ``append_call``) where
  it is installed, else in version 2's two statements; both paths are run here, each refused
  statement and dropped prepared statement included.

The cases with a server need the test server (tests/servers.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import admin

from merkle_memory.errors import DatabaseError, LedgerRollbackError
from merkle_memory.ledger import Ledger, open_tenant
from merkle_memory.ledger._entry import GENESIS, build_entries, usual_stamp
from merkle_memory.ledger._postgres import (
    SCHEMA_VERSION,
    PostgresLedgerStore,
    fragment_one,
    fragments,
)

TS = 1_789_851_200.25
QUEUE_LOCK = 1835859971  # the first key of mm_append_wait's advisory lock


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rebuild(head: bytes, body: bytes, tail: bytes, seq: int, prev: str) -> tuple[bytes, str]:
    """The server's composition, naively: the line and hash of an entry at ``seq``."""
    middle = body + prev.encode() + b'","seq":' + str(seq).encode() + tail
    digest = hashlib.sha256(head + middle).hexdigest()
    return head + b'"hash":"' + digest.encode() + b'",' + middle + b"\n", digest


IDS = st.lists(st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s), max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    ids=IDS.filter(bool),
    op=st.sampled_from(["save", "adopt", "forget"]),
    ts=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    seq=st.integers(min_value=0, max_value=2**40),
    prev=st.sampled_from([GENESIS, _digest("a"), _digest("b")]),
)
def test_fragments_rebuild_the_lines_at_any_seq(
    ids: list[str], op: str, ts: float, seq: int, prev: str
) -> None:
    """Cut at seq 1 after GENESIS, the fragments give, at any ``seq`` after any ``prev``,
    the lines and hashes ``build_entries`` gives there."""
    pairs = [(mid, _digest(mid)) for mid in ids]
    _made, data = build_entries(pairs, op, ts, 0, GENESIS)
    heads, bodies, tails = fragments(data)
    entries, expected = build_entries(pairs, op, ts, seq, prev)
    lines = b""
    for n, (head, body, tail) in enumerate(zip(heads, bodies, tails, strict=True)):
        line, prev = _rebuild(head, body, tail, seq + 1 + n, prev)
        assert prev == entries[n].hash
        lines += line
    assert lines == expected


def test_fragments_of_a_known_line() -> None:
    """The three fragments of one plain entry, byte for byte."""
    _made, data = build_entries([("m1", "0" * 64)], "save", TS, 0, GENESIS)
    assert fragments(data) == (
        [b'{"content_sha256":"' + b"0" * 64 + b'",'],
        [b'"memory_id":"m1","op":"save","prev":"'],
        [b',"ts":1789851200.25}'],
    )


@settings(max_examples=300, deadline=None)
@given(
    memory_id=st.text(min_size=1, max_size=12),
    op=st.sampled_from(["save", "adopt", "forget", "seal"]),
    ts=st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 1e-7, 1e16, 5e-5]),
)
def test_one_entry_fragments_are_those_of_its_line(memory_id: str, op: str, ts: float) -> None:
    """Where ``usual_stamp`` accepts one entry's arguments, ``fragment_one`` formats exactly
    the fragments cut from the line ``build_entries`` makes (the naive reference); where it
    declines, ``build_entries`` is what decides (it builds the entry or raises)."""
    digest = _digest(memory_id)
    usual = usual_stamp(memory_id, digest, op, ts)
    if usual is None:
        return
    _made, data = build_entries([(memory_id, digest)], op, ts, 0, GENESIS)
    assert fragment_one(memory_id, digest, op, usual[1]) == fragments(data)


def test_usual_stamp_declines_what_needs_the_general_path() -> None:
    """The inputs ``usual_stamp`` sends to ``build_entries``: escapes in the id, a digest not
    64 lowercase hex digits, an unknown op, a non-finite or non-float ts, an empty or too
    long id; accepted: a plain id, with its ts rounded to microseconds."""
    good = _digest("x")
    assert usual_stamp("plain", good, "save", TS) == (TS, "1789851200.25")
    assert usual_stamp("plain", good, "save", 1.0000004) == (1.0, "1")
    for args in (
        ('quo"te', good, "save", TS),
        ("back\\slash", good, "save", TS),
        ("nl\n", good, "save", TS),
        ("plain", good.upper(), "save", TS),
        ("plain", good[:63], "save", TS),
        ("plain", good, "seal", TS),
        ("plain", good, "save", float("inf")),
        ("plain", good, "save", 5),
        ("", good, "save", TS),
        ("x" * 1025, good, "save", TS),
    ):
        assert usual_stamp(*args) is None, args


def _bytes(ledger: Ledger) -> bytes:
    with ledger.store.reader() as file:
        return b"" if file is None else file.read(0, file.size())


def _queue_rows(url: str) -> int:
    with admin(url) as conn:
        found = conn.execute("SELECT count(*) FROM mm_append_slots WHERE pending").fetchone()
        return int(found[0])


class _NoLock(PostgresLedgerStore):
    """A store whose lock path fails: an append that succeeds went through the queue."""

    def locked(self, *, write: bool):  # type: ignore[no-untyped-def,override]
        raise AssertionError("the lock path was taken")


PATHS = ["call", "statements"]


def _take(store: PostgresLedgerStore, path: str) -> None:
    """Send ``store``'s queued appends down ``path``: ``"call"`` (the procedure, installed
    by the first append) or ``"statements"`` (version 2's two statements)."""
    if path == "statements":
        store._call_checked, store._call_ready = True, False


@pytest.mark.parametrize("path", PATHS)
def test_queued_appends_are_the_bytes_of_a_folder_ledger(
    postgres_url: str, tmp_path: Path, path: str
) -> None:
    """Single appends and batches with escaped, astral and long ids, every op: the queue
    path writes exactly the folder's bytes, returns the folder's entries, and leaves the
    queue empty; verify finds the chain intact. Both ways a writer alone on its tenant
    commits: the procedure's own steps ("call") and ``mm_append_lead`` (through
    ``mm_append_now``, "statements")."""
    store = _NoLock(postgres_url + "#bytes")
    _take(store, path)
    db = Ledger(store)
    folder = Ledger(tmp_path / "cc" / "ledger.jsonl")
    calls: list[tuple[list[tuple[str, str]], str]] = [
        ([("plain", _digest("1"))], "save"),
        ([('quote " and \\ back', _digest("2")), ("tab\there\nnl", _digest("3"))], "adopt"),
        ([("é ünïcode 😀 \u2028", _digest("4"))], "save"),
        ([("x" * 1024, _digest("5"))], "forget"),
        ([(f"batch-{i}", _digest(str(i))) for i in range(7)], "save"),
    ]
    for n, (pairs, op) in enumerate(calls):
        got = db.append_many(pairs, op=op, ts=TS + n)
        want = folder.append_many(pairs, op=op, ts=TS + n)
        assert got == want
    assert _bytes(db) == folder.path.read_bytes()
    assert db.store.read_head() is not None
    assert db.store.read_head().seq == 12  # type: ignore[union-attr]
    assert _queue_rows(postgres_url) == 0
    report = open_tenant(postgres_url + "#bytes").verify()
    assert (report.chain, report.entries) == ("intact", 12)


@pytest.mark.parametrize("path", PATHS)
def test_waiting_writers_are_committed_by_one_leader(postgres_url: str, path: str) -> None:
    """Eight writers find the queue lock held (as while a leader commits): they queue, and
    when it is free one of them sequences all eight in one transaction, so every line of
    theirs has one xmin; seqs 2..9 without gap, each writer's entry as it was told."""
    url = postgres_url + "#batch"
    Ledger(url).append("first", _digest("first"), ts=TS)
    tenant = PostgresLedgerStore(url).tenant_id()
    results: dict[int, tuple[int, str]] = {}
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            store = _NoLock(url)
            _take(store, path)
            entry = Ledger(store).append(f"w{n}", _digest(str(n)), ts=TS + n)
            results[n] = (entry.seq, entry.hash)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with admin(postgres_url) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (QUEUE_LOCK, tenant))
        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while _queue_rows(postgres_url) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _queue_rows(postgres_url) == 8
        holder.execute("COMMIT")
        for thread in threads:
            thread.join(60)
    assert errors == []
    assert sorted(seq for seq, _ in results.values()) == list(range(2, 10))
    with admin(postgres_url) as conn:
        rows = conn.execute(
            "SELECT start, xmin::text, line FROM mm_ledger_lines WHERE tenant_id = %s"
            " ORDER BY start",
            (tenant,),
        ).fetchall()
    assert len({xmin for _, xmin, _ in rows[1:]}) == 1  # one commit for the eight
    assert rows[0][1] != rows[1][1]
    entries = list(Ledger(url).entries(check_hash=True))
    assert [e.seq for e in entries] == list(range(1, 10))
    for n, (seq, digest) in results.items():
        assert (entries[seq - 1].memory_id, entries[seq - 1].hash) == (f"w{n}", digest)
    assert _queue_rows(postgres_url) == 0


def test_a_rollback_is_refused_through_the_lock_path(postgres_url: str) -> None:
    """The head row set back behind what a Ledger acknowledged: the queue does not append,
    the lock path raises LedgerRollbackError, nothing is written, nothing stays queued."""
    url = postgres_url + "#back"
    ledger = Ledger(url)
    for n in range(3):
        ledger.append(f"m{n}", _digest(str(n)), ts=TS)
    before = _bytes(ledger)
    first_hash = next(iter(ledger.entries())).hash
    tenant = ledger.store.tenant_id()  # type: ignore[attr-defined]
    with admin(postgres_url) as conn:
        first = conn.execute(
            "SELECT line FROM mm_ledger_lines WHERE tenant_id = %s AND start = 0", (tenant,)
        ).fetchone()[0]
        conn.execute("DELETE FROM mm_ledger_lines WHERE tenant_id = %s AND start > 0", (tenant,))
        conn.execute(
            "UPDATE mm_tenants SET size = %s, head_seq = 1, head_hash = %s, head_end = %s"
            " WHERE id = %s",
            (len(first), first_hash, len(first), tenant),
        )
    with pytest.raises(LedgerRollbackError):
        ledger.append("late", _digest("late"), ts=TS)
    assert _bytes(ledger) == before[: len(first)]
    assert _queue_rows(postgres_url) == 0


def test_a_head_not_left_by_an_append_goes_down_the_lock_path(postgres_url: str) -> None:
    """A head row without its fingerprint (as an import leaves it): the queue declines, the
    lock path walks the chain, appends and writes the fingerprint; the next append queues."""
    url = postgres_url + "#odd"
    Ledger(url).append("a", _digest("a"), ts=TS)
    tenant = PostgresLedgerStore(url).tenant_id()
    with admin(postgres_url) as conn:
        conn.execute("UPDATE mm_tenants SET head_fingerprint = NULL WHERE id = %s", (tenant,))
    with pytest.raises(AssertionError, match="the lock path was taken"):
        Ledger(_NoLock(url)).append("b", _digest("b"), ts=TS)
    assert Ledger(url).append("b", _digest("b"), ts=TS).seq == 2
    assert Ledger(_NoLock(url)).append("c", _digest("c"), ts=TS).seq == 3
    assert [e.memory_id for e in Ledger(url).entries(check_hash=True)] == ["a", "b", "c"]
    assert _queue_rows(postgres_url) == 0


def _drop_call(conn: Any) -> None:
    """Remove component ``append_call`` (a database as version 2 alone left it)."""
    conn.execute("DROP PROCEDURE IF EXISTS mm_append")
    conn.execute("DELETE FROM mm_schema WHERE component = 'append_call'")


def _downgrade(url: str) -> None:
    """Make the database what schema version 1 was: no queue, no functions, version 1."""
    with admin(url) as conn:
        _drop_call(conn)
        conn.execute("DROP TABLE mm_append_slots")
        for name in ("mm_append_now", "mm_append_wait", "mm_append_lead"):
            conn.execute(f"DROP FUNCTION {name}")
        conn.execute("UPDATE mm_schema SET version = 1 WHERE component = 'ledger'")


def _version(url: str) -> int:
    with admin(url) as conn:
        return int(
            conn.execute("SELECT version FROM mm_schema WHERE component = 'ledger'").fetchone()[0]
        )


def test_a_version_1_database_is_read_as_is_and_upgraded_by_a_write(postgres_url: str) -> None:
    """Version 1 (no queue): verify reads it without changing it; the next append installs
    version 2 in place and continues the chain; version 3 is refused."""
    url = postgres_url + "#old"
    Ledger(url).append("a", _digest("a"), ts=TS)
    _downgrade(postgres_url)
    report = open_tenant(url).verify()
    assert (report.chain, report.entries, _version(postgres_url)) == ("intact", 1, 1)
    assert Ledger(url).append("b", _digest("b"), ts=TS).seq == 2
    assert _version(postgres_url) == SCHEMA_VERSION == 2
    assert Ledger(_NoLock(url)).append("c", _digest("c"), ts=TS).seq == 3
    assert [e.seq for e in Ledger(url).entries(check_hash=True)] == [1, 2, 3]
    with admin(postgres_url) as conn:
        conn.execute("UPDATE mm_schema SET version = 3 WHERE component = 'ledger'")
    with pytest.raises(DatabaseError, match="ledger schema version 3, this library reads"):
        Ledger(url).append("d", _digest("d"), ts=TS)


def test_a_queued_record_commits_with_its_entry(postgres_url: str) -> None:
    """``append_queued(..., record=...)``: the record row is upserted by the transaction that
    writes the entry's line (one xmin), and a second save of the name replaces its bytes."""
    store = PostgresLedgerStore(postgres_url + "#rec")
    for n, body in enumerate((b'{"id":"r"}', b'{"id":"r","v":2}')):
        queued = store.append_queued([("r", _digest(str(n)))], "save", TS, None, ("r.json", body))
        assert queued is not None
        entries, end = queued
        assert ([e.seq for e in entries], end > 0) == ([n + 1], True)
    with admin(postgres_url) as conn:
        record = conn.execute("SELECT body, xmin::text FROM mm_records").fetchone()
        lines = conn.execute("SELECT xmin::text FROM mm_ledger_lines ORDER BY start").fetchall()
    assert (bytes(record[0]), record[1]) == (b'{"id":"r","v":2}', lines[1][0])


def test_a_save_goes_through_the_queue(postgres_url: str) -> None:
    """``PostgresTenant.save`` outside a block queues its entry with its record row: saves
    succeed with the lock path failing, and verify finds the chain intact, every record
    sealed, a re-save's row replaced."""
    tenant = open_tenant(postgres_url + "#saves")
    tenant.save({"id": "genesis"})  # the tenant row, made through the queue too

    def refuse(*, write: bool) -> None:
        raise AssertionError("the lock path was taken")

    tenant.ledger.store.locked = refuse  # type: ignore[method-assign,assignment]
    entries = [tenant.save({"id": rid, "summary": f"s{n}"}) for n, rid in enumerate("abca")]
    assert [e.seq for e in entries] == [2, 3, 4, 5]
    report = open_tenant(postgres_url + "#saves").verify()
    assert (report.chain, report.ok, report.entries, report.sealed) == ("intact", True, 5, 4)
    with admin(postgres_url) as conn:
        body = conn.execute("SELECT body FROM mm_records WHERE name = 'a.json'").fetchone()[0]
    assert b'"summary":"s3"' in bytes(body).replace(b" ", b"")


@contextlib.contextmanager
def _limited_role(postgres_url: str, url: str) -> Iterator[tuple[str, str]]:
    """A new login role allowed to read and write the tables of the test's schema but not
    to create anything in it, for the block: ``(url as that role, schema)``; dropped at the
    end."""
    role = f"mm_writer_{secrets.token_hex(4)}"
    with admin(postgres_url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
        )
    try:
        limited = re.sub(r"^(postgres(?:ql)?://)[^@/]*@", rf"\g<1>{role}@", url)
        assert limited != url
        yield limited, schema
    finally:
        with admin(postgres_url) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_role_that_cannot_upgrade_keeps_appending_on_version_1(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A role allowed to write the tables but not to create in the schema: the upgrade to
    version 2 fails once (a warning), the database stays at version 1 and appends take the
    lock path, the chain continuing without a gap."""
    url = postgres_url + "#limited"
    Ledger(url).append("a", _digest("a"), ts=TS)
    _downgrade(postgres_url)
    with _limited_role(postgres_url, url) as (limited, _schema):
        ledger = Ledger(limited)
        with caplog.at_level("WARNING", logger="merkle_memory.ledger"):
            assert [ledger.append(m, _digest(m), ts=TS).seq for m in "bcd"] == [2, 3, 4]
        assert [r.message.split(" (")[0] for r in caplog.records] == [
            f"Ledger {ledger.store.label}: cannot install schema version 2"
        ]
        assert _version(postgres_url) == 1
        assert [e.seq for e in Ledger(url).entries(check_hash=True)] == [1, 2, 3, 4]


def _drop_statements(store: PostgresLedgerStore, sql: str) -> None:
    """Run ``sql`` (a ``DEALLOCATE``) on the pooled connection the store's appends use."""
    with store._pool.connection() as conn:
        conn.execute(sql)


@pytest.mark.parametrize("path", PATHS)
def test_dropped_statements_are_prepared_again_and_nothing_is_queued_twice(
    postgres_url: str, path: str
) -> None:
    """The queue's statements are prepared once per connection. When something drops them
    (``DEALLOCATE ALL``, as a pooler's ``DISCARD ALL`` does), the next append prepares them
    again and lands once; when only the last statement of an append was dropped (the
    procedure's call; version 2's wait, after its entry was queued), the entry is not
    queued again (its seq is the one it was given, the next entry follows it)."""
    url = postgres_url + "#dropped"
    store = _NoLock(url)
    _take(store, path)
    ledger = Ledger(store)
    assert ledger.append("a", _digest("a"), ts=TS).seq == 1
    _drop_statements(store, "DEALLOCATE ALL")
    assert ledger.append("b", _digest("b"), ts=TS).seq == 2  # prepared again
    store._contended = True  # version 2: the queue's two statements, not mm_append_now
    last = "mm_append" if path == "call" else "mm_append_wait"
    _drop_statements(store, f"DEALLOCATE {last}")
    assert ledger.append("c", _digest("c"), ts=TS).seq == 3
    assert ledger.append("d", _digest("d"), ts=TS).seq == 4
    entries = list(Ledger(url).entries(check_hash=True))
    assert [(e.seq, e.memory_id) for e in entries] == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert _queue_rows(postgres_url) == 0
    with admin(postgres_url) as conn:
        names = conn.execute("SELECT name FROM pg_prepared_statements ORDER BY name").fetchall()
    assert names == []  # the admin session prepared nothing: statements are per session


def test_a_statement_refused_in_the_pipeline_raises_and_drops_the_connection(
    postgres_url: str,
) -> None:
    """The wait refused by the server after the entry was queued (here its function raises)
    gives ``DatabaseError`` and the connection is closed, not pooled; the queued entry is
    not lost either: the next append leads and commits it before its own (as after a
    writer killed while waiting, docs/DECISIONS.md). A function that cannot be prepared
    gives ``DatabaseError`` too, and once it is back the statements are prepared again."""
    url = postgres_url + "#refused"
    store = _NoLock(url)
    _take(store, "statements")
    ledger = Ledger(store)
    assert ledger.append("a", _digest("a"), ts=TS).seq == 1
    with admin(postgres_url) as conn:
        oid = conn.execute("SELECT 'mm_append_wait(integer, bigint)'::regprocedure::oid")
        original = conn.execute("SELECT pg_get_functiondef(%s)", (oid.fetchone()[0],))
        definition = original.fetchone()[0]
        conn.execute(
            "CREATE OR REPLACE FUNCTION mm_append_wait(tenant integer, me bigint,"
            " OUT first_seq bigint, OUT first_prev text, OUT last_hash text,"
            " OUT last_end bigint, OUT batch integer) LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"
        )
    with store._pool.connection() as pooled:
        before = pooled.info.backend_pid
    store._contended = True
    try:
        with pytest.raises(DatabaseError, match="refused by the test"):
            ledger.append("b", _digest("b"), ts=TS)
        with store._pool.connection() as pooled:
            assert pooled.info.backend_pid != before  # the refused one was closed
        with admin(postgres_url) as conn:
            conn.execute("ALTER FUNCTION mm_append_wait(integer, bigint) RENAME TO mm_gone")
        store._contended = True
        with pytest.raises(DatabaseError, match="mm_append_wait"):
            ledger.append("c", _digest("c"), ts=TS)  # cannot be prepared: nothing queued
        with admin(postgres_url) as conn:
            conn.execute("ALTER FUNCTION mm_gone(integer, bigint) RENAME TO mm_append_wait")
    finally:
        with admin(postgres_url) as conn:
            conn.execute(definition)
    assert ledger.append("d", _digest("d"), ts=TS).seq == 3
    entries = list(Ledger(url).entries(check_hash=True))
    assert [(e.seq, e.memory_id) for e in entries] == [(1, "a"), (2, "b"), (3, "d")]
    assert _queue_rows(postgres_url) == 0


def test_a_call_refused_after_queuing_raises_and_its_entry_is_not_lost(postgres_url: str) -> None:
    """The procedure refused after it committed its slot (the queue lock was held, so it
    queued; then the leading function raised): ``DatabaseError``, and the queued entry is
    not lost: the next append leads and commits it before its own (as after a writer killed
    while waiting, docs/DECISIONS.md). A procedure that cannot be prepared gives
    ``DatabaseError`` with nothing queued; once it is back, it is prepared again."""
    url = postgres_url + "#refused-call"
    store = _NoLock(url)
    ledger = Ledger(store)
    assert ledger.append("a", _digest("a"), ts=TS).seq == 1
    assert store._call_ready
    tenant = store.tenant_id()
    with admin(postgres_url) as conn:
        oid = conn.execute(
            "SELECT 'mm_append_lead(integer, bigint, bigint, text, bytea[], bytea[], bytea[],"
            " text, bytea)'::regprocedure::oid"
        ).fetchone()[0]
        definition = conn.execute("SELECT pg_get_functiondef(%s)", (oid,)).fetchone()[0]
    refusing = definition.replace("BEGIN\n", "BEGIN\nRAISE EXCEPTION 'refused by the test';\n", 1)
    assert refusing != definition
    errors: list[BaseException] = []

    def write() -> None:
        try:
            ledger.append("b", _digest("b"), ts=TS)
        except BaseException as exc:  # checked below
            errors.append(exc)

    writer = threading.Thread(target=write)
    try:
        with admin(postgres_url) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (QUEUE_LOCK, tenant))
            writer.start()
            deadline = time.monotonic() + 60
            while _queue_rows(postgres_url) < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _queue_rows(postgres_url) == 1
            with admin(postgres_url) as conn:
                conn.execute(refusing)
            holder.execute("COMMIT")
            writer.join(60)
    finally:
        with admin(postgres_url) as conn:
            conn.execute(definition)
    assert len(errors) == 1 and isinstance(errors[0], DatabaseError), errors
    assert "refused by the test" in str(errors[0])
    assert _queue_rows(postgres_url) == 1  # b is still queued
    _drop_statements(store, "DEALLOCATE ALL")
    with admin(postgres_url) as conn:
        conn.execute("ALTER PROCEDURE mm_append RENAME TO mm_gone")
    try:
        with pytest.raises(DatabaseError, match="mm_append"):
            ledger.append("c", _digest("c"), ts=TS)  # cannot be prepared: nothing queued
    finally:
        with admin(postgres_url) as conn:
            conn.execute("ALTER PROCEDURE mm_gone RENAME TO mm_append")
    assert ledger.append("d", _digest("d"), ts=TS).seq == 3
    entries = list(Ledger(url).entries(check_hash=True))
    assert [(e.seq, e.memory_id) for e in entries] == [(1, "a"), (2, "b"), (3, "d")]
    assert _queue_rows(postgres_url) == 0


def test_the_procedure_is_installed_once_and_a_role_that_cannot_keeps_two_statements(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first queued append installs component ``append_call`` version 1 beside
    ``ledger`` version 2. Where it is absent and the role may not create routines, the
    install fails once (a warning), the database is left as it was, and appends still go
    through the queue, in version 2's two statements, the chain continuing without a gap;
    a second store of that process neither tries again nor warns again; another version of
    the component is not called."""
    url = postgres_url + "#nocall"
    Ledger(url).append("a", _digest("a"), ts=TS)
    with admin(postgres_url) as conn:
        components = conn.execute("SELECT component, version FROM mm_schema ORDER BY 1").fetchall()
        assert ("append_call", 1) in components and ("ledger", SCHEMA_VERSION) in components
        _drop_call(conn)
    with _limited_role(postgres_url, url) as (limited, schema):
        store = _NoLock(limited)
        ledger = Ledger(store)
        with caplog.at_level("WARNING", logger="merkle_memory.ledger"):
            assert [ledger.append(m, _digest(m), ts=TS).seq for m in "bcd"] == [2, 3, 4]
        assert [r.message for r in caplog.records] == [
            f"Ledger {store.label}: cannot install append_call (permission denied for schema"
            f" {schema}); appends take two statements"
        ]
        assert (store._call_checked, store._call_ready) == (True, False)
        with caplog.at_level("WARNING", logger="merkle_memory.ledger"):
            again = _NoLock(limited)  # another store of this process: no second warning
            assert Ledger(again).append("d2", _digest("d2"), ts=TS).seq == 5
        assert len(caplog.records) == 1
        assert (again._call_checked, again._call_ready) == (True, False)
        with admin(postgres_url) as conn:
            found = conn.execute(
                "SELECT count(*) FROM mm_schema WHERE component = 'append_call'"
            ).fetchone()[0]
        assert found == 0
        assert [e.seq for e in Ledger(url).entries(check_hash=True)] == [1, 2, 3, 4, 5]
    with admin(postgres_url) as conn:
        conn.execute("INSERT INTO mm_schema VALUES ('append_call', 2)")
    other = _NoLock(url)
    assert Ledger(other).append("e", _digest("e"), ts=TS).seq == 6
    assert (other._call_checked, other._call_ready) == (True, False)


_INTERRUPTED_WRITER = """
import hashlib, sys, time
from merkle_memory.ledger import Ledger
ledger = Ledger(sys.argv[1])
ledger.append("a", hashlib.sha256(b"a").hexdigest())
with ledger.store._pool.connection() as conn:  # the one the next append borrows
    print(ledger.store.tenant_id(), conn.info.backend_pid, flush=True)
sys.stdin.readline()
began = time.monotonic()
try:
    ledger.append("b", hashlib.sha256(b"b").hexdigest())
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", round(time.monotonic() - began, 3), flush=True)
"""


def _interrupt_while_waiting(postgres_url: str, url: str, hold: str) -> None:
    """Start a writer whose second append waits for what ``hold`` (SQL of one
    ``%s``, the tenant id) takes in an open transaction, send it SIGINT once its session
    waits for a lock, check it raised ``KeyboardInterrupt`` within 20 s, then end the
    transaction."""
    repo = Path(__file__).resolve().parents[2]
    writer = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_WRITER, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    try:
        assert writer.stdin is not None and writer.stdout is not None
        tenant, backend = (int(n) for n in writer.stdout.readline().split())
        with admin(postgres_url) as holder:
            holder.execute("BEGIN")
            holder.execute(hold, (tenant,))
            writer.stdin.write("go\n")
            writer.stdin.flush()
            deadline = time.monotonic() + 30
            waiting = 0
            while not waiting and time.monotonic() < deadline:
                time.sleep(0.02)
                waiting = holder.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND pid = %s",
                    (backend,),
                ).fetchone()[0]
            assert waiting == 1
            writer.send_signal(signal.SIGINT)
            answered = select.select([writer.stdout], [], [], 20)[0]
            said = writer.stdout.readline().split() if answered else ["no answer in 20 s"]
            holder.execute("ROLLBACK")
        assert said[0] == "interrupted" and float(said[1]) < 20, said
        assert writer.wait(30) == 0
    finally:
        writer.kill()
        writer.communicate()


def _settled(url: str, count: int) -> list[str]:
    """The ids of the tenant's entries once it holds ``count`` of them (at most 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ids = [e.memory_id for e in Ledger(url).entries(check_hash=True)]
        if len(ids) >= count:
            return ids
        time.sleep(0.02)
    return [e.memory_id for e in Ledger(url).entries(check_hash=True)]


@pytest.mark.parametrize(
    ("waiting_for", "hold"),
    [
        ("the head row", "SELECT id FROM mm_tenants WHERE id = %s FOR UPDATE"),
        ("the queue lock", f"SELECT pg_advisory_xact_lock({QUEUE_LOCK}, %s)"),
    ],
)
def test_ctrl_c_interrupts_an_append_waiting_for_a_lock(
    postgres_url: str, waiting_for: str, hold: str
) -> None:
    """An append waiting for the head row (a ``locked()`` block elsewhere holds it) or for
    the queue lock (a leader holds it; the append has queued its slot) is interrupted by
    SIGINT at once: ``KeyboardInterrupt`` in the writer (libpq's own wait would resume after
    the signal and go on waiting) and its connection dropped. Its session is not cancelled:
    like a killed writer's, it commits the entry as soon as the lock frees, in queue order,
    so nothing is left pending for a later leader to commit after appends made since (the
    next append takes seq 3, after it)."""
    url = postgres_url + "#interrupt-" + waiting_for.split()[-1]
    _interrupt_while_waiting(postgres_url, url, hold)
    assert _settled(url, 2) == ["a", "b"]
    assert _queue_rows(postgres_url) == 0
    ledger = Ledger(_NoLock(url))
    assert ledger.append("c", _digest("c"), ts=TS).seq == 3
    assert [e.memory_id for e in Ledger(url).entries(check_hash=True)] == ["a", "b", "c"]
