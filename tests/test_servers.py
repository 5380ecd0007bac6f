"""The real-server test infrastructure and the optional extras that reach the servers.

The core must import and work with neither psycopg nor boto3 installed (they are the extras
``postgres`` and ``s3``, imported lazily); the fixtures skip on a machine without servers and
fail under ``MERKLE_MEMORY_REQUIRE_SERVERS=1`` (CI); the servers CI starts are the ones the
backends' promises rest on (fsync and synchronous commit on).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import servers
from servers import S3Server
from support import REPO, fork_child, held_by_another_thread

from merkle_memory import _pg, open_store
from merkle_memory.dag import _postgres as dag_postgres
from merkle_memory.errors import DatabaseError
from merkle_memory.ledger import Ledger, PostgresTenant, _pgtenant
from merkle_memory.ledger import _postgres as ledger_postgres
from merkle_memory.ledger._postgres import PostgresLedgerStore

BLOCKED = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_pool", "boto3", "botocore"):
            raise ImportError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
"""


def test_core_imports_and_works_without_the_database_extras(tmp_path: object) -> None:
    """With psycopg and boto3 unimportable, every module of the package imports, a folder
    tenant and an SQLite node store work, and a postgresql:// URL raises the library's error naming
    the extra to install (never an ImportError)."""
    script = BLOCKED + textwrap.dedent(
        f"""
        import importlib, pkgutil, tempfile
        import merkle_memory
        for info in pkgutil.walk_packages(merkle_memory.__path__, "merkle_memory."):
            importlib.import_module(info.name)
        from merkle_memory import Tenant, _pg, open_store
        from merkle_memory.errors import MerkleMemoryError
        root = tempfile.mkdtemp(dir={str(tmp_path)!r})
        assert Tenant(root + "/t").save({{"id": "m1"}}).seq == 1
        with open_store(root + "/n.db") as store:
            assert len(store) == 0
        for call in (lambda: open_store("postgresql:///x"), lambda: _pg.driver()):
            try:
                call()
            except MerkleMemoryError as exc:
                assert "merkle_memory[postgres]" in str(exc), exc
            else:
                raise AssertionError("no DatabaseError")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "boto3"))
        assert loaded == [], loaded
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_missing_servers_skip_here_and_fail_when_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the server variables a fixture skips with the way to run it; with
    MERKLE_MEMORY_REQUIRE_SERVERS=1 (CI) the same absence fails the test."""
    monkeypatch.delenv(servers.POSTGRES, raising=False)
    monkeypatch.delenv(servers.REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="with-servers"):
        servers.postgres_base_url()
    monkeypatch.setenv(servers.REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="MERKLE_MEMORY_REQUIRE_SERVERS=1 requires"):
        servers.postgres_base_url()


def test_urls_split_and_passwords_never_shown() -> None:
    """A URL's fragment is this library's (the tenant), never libpq's; messages never show a
    password, in the user part or as a parameter."""
    assert _pg.split_url("postgresql:///agents?host=/run/pg#cc") == (
        "postgresql:///agents?host=/run/pg",
        "cc",
    )
    assert _pg.split_url("postgres://h/db") == ("postgres://h/db", None)
    assert _pg.split_url("postgresql://h/db#") == ("postgresql://h/db", "")
    assert _pg.redact("postgresql://bob:s3cret@h:5/db?password=x&sslmode=y") == (
        "postgresql://bob:***@h:5/db?password=***&sslmode=y"
    )
    assert _pg.redact("postgresql:///db?host=/s&sslpassword=S3cret#t") == (
        "postgresql:///db?host=/s&sslpassword=***#t"
    )
    assert _pg.redact("error: invalid URI query parameter: 'Password=S3cret' in x") == (
        "error: invalid URI query parameter: 'Password=***' in x"
    )
    assert _pg.redact("run: merkle-memory ledger seal 'postgresql://h/db?PASSWORD=a&b=c'") == (
        "run: merkle-memory ledger seal 'postgresql://h/db?PASSWORD=***&b=c'"
    )
    assert _pg.redact("host=h password=secret dbname=d") == "host=h password=*** dbname=d"
    assert not _pg.is_url("/tmp/x") and not _pg.is_url(b"postgresql://x")
    with pytest.raises(DatabaseError):
        _pg.split_url("mysql://h/db")


def test_postgres_connections_commit_synchronously(postgres_url: str) -> None:
    """The pool's connections wait for the write-ahead log flush on commit, on a server with
    fsync on, and a driver error arrives as DatabaseError with its SQLSTATE."""
    pool = _pg.Pool(postgres_url + "#ignored")
    with pool.connection() as conn:
        names = ("synchronous_commit", "fsync")
        settings = [conn.execute(f"SHOW {name}").fetchone()[0] for name in names]
        assert settings == ["on", "on"]
        try:
            conn.execute("SELECT * FROM no_such_table")
        except Exception as exc:
            error = _pg.translate(exc, pool.conninfo, "read")
        assert error.sqlstate == "42P01" and "no_such_table" in str(error)
    pool.close()


def test_pool_settings_apply_to_every_new_connection(postgres_url: str) -> None:
    """A pool's ``settings`` are set on each connection it makes (after synchronous commit);
    a pool without them leaves the server's default; a ledger store's sessions plan their
    statements generically (``plan_cache_mode``)."""
    pool = _pg.Pool(postgres_url, settings=(("plan_cache_mode", "force_generic_plan"),))
    plain = _pg.Pool(postgres_url)
    store = PostgresLedgerStore(postgres_url + "#plans")
    try:
        with pool.connection() as first, pool.connection() as second:
            for conn in (first, second):
                shown = [conn.execute(f"SHOW {n}").fetchone()[0] for n in _PLAN_SETTINGS]
                assert shown == ["force_generic_plan", "on"]
        with plain.connection() as conn:
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
        Ledger(store).append("a", "ab" * 32, ts=1.5)
        with store._pool.connection() as conn:
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
    finally:
        pool.close()
        plain.close()
        store.close()


_PLAN_SETTINGS = ("plan_cache_mode", "synchronous_commit")


def test_the_installers_share_one_advisory_key_and_the_node_write_lock_has_its_own() -> None:
    """Advisory keys are database-wide. The installers create shared tables (``mm_schema``),
    so they take one key (the ledger's took the node store's write lock key 0x6D6D0002, and
    the tenant tables' 0x6D6D0003: concurrent first uses failed with a duplicate-object
    error); the node store's write lock is apart (a sync held back every new ledger)."""
    keys = {
        "nodes installer": dag_postgres._SCHEMA_LOCK,
        "ledger installer": ledger_postgres._SCHEMA_LOCK,
        "tenant tables installer": _pgtenant._TABLES_LOCK,
        "nodes write": dag_postgres._WRITE_LOCK,
    }
    assert keys == {
        "nodes installer": 0x6D6D0001,
        "ledger installer": 0x6D6D0001,
        "tenant tables installer": 0x6D6D0001,
        "nodes write": 0x6D6D0002,
    }


def _first_uses_at_once(url: str) -> None:
    """Nine processes, released together: three open a node store, three append a first
    entry to a ledger, three save into a tenant, all of ``url``; each must succeed."""
    go_read, go_write = os.pipe()

    def released(job: Callable[[], object]) -> Callable[[], None]:
        def body() -> None:
            assert os.read(go_read, 1) == b"g"
            job()

        return body

    jobs: list[Callable[[], object]] = []
    for i in range(3):
        jobs.append(lambda: open_store(url).close())
        jobs.append(lambda i=i: Ledger(PostgresLedgerStore(f"{url}#l{i}")).append("a", "ab" * 32))
        jobs.append(lambda i=i: PostgresTenant(f"{url}#t{i}").save({"id": "m"}))
    try:
        waits = [fork_child(released(job)) for job in jobs]
        os.write(go_write, b"g" * len(jobs))
        for wait in waits:
            wait()
    finally:
        os.close(go_read)
        os.close(go_write)


def test_first_uses_of_every_kind_at_once_on_a_new_database_all_succeed() -> None:
    """Nine processes released together on an empty schema (three node stores, three ledgers,
    three tenants, each installing what it needs), four times: every one succeeds. With one
    installer key per kind, some failed with ``duplicate key value violates unique constraint
    "pg_type_typname_nsp_index"`` (two ``CREATE TABLE IF NOT EXISTS mm_schema`` at once)."""
    base = servers.postgres_base_url()
    for _round in range(4):
        schema = f"mm_race_{secrets.token_hex(5)}"
        with servers.admin(base) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            _first_uses_at_once(servers.with_search_path(base, schema))
        finally:
            with servers.admin(base) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_node_store_sync_does_not_hold_back_a_new_ledger(postgres_url: str) -> None:
    """While a session holds the node store's exclusive write lock (as ``sync_files`` and a
    forget do, for a whole transaction), the first append to a new ledger (which installs
    the ledger schema under its own lock) goes through."""
    store = PostgresLedgerStore(postgres_url + "#beside-nodes")
    done = threading.Event()

    def first_append() -> None:
        Ledger(store).append("a", "ab" * 32, ts=1.5)
        done.set()

    holder = servers.admin(postgres_url)
    try:
        with holder.transaction():
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (dag_postgres._WRITE_LOCK,))
            worker = threading.Thread(target=first_append, daemon=True)
            worker.start()
            finished = done.wait(20)  # the old key: blocked until this transaction ended
        worker.join(20)
        assert finished
        assert [e.seq for e in Ledger(store).entries()] == [1]
    finally:
        holder.close()
        store.close()


def test_the_s3_server_stores_objects_byte_exact(s3_server: S3Server) -> None:
    """The S3-compatible server started for the tests keeps an object's bytes exactly."""
    client = s3_server.client()
    client.create_bucket(Bucket="infra-check")
    body = bytes(range(256)) * 3
    client.put_object(Bucket="infra-check", Key="a/b.bin", Body=body)
    assert client.get_object(Bucket="infra-check", Key="a/b.bin")["Body"].read() == body


def test_a_pool_is_usable_in_a_child_forked_while_another_thread_holds_its_lock() -> None:
    """``Pool``'s lock held by another thread at a fork is free in the child (``take``,
    ``give`` and ``close`` waited for it forever), and the parent's idle connections are
    forgotten there, never closed (closing would end the parent's sessions)."""
    pool = _pg.Pool("postgresql:///x")
    parents = object()
    pool._idle.append(parents)

    def child() -> None:
        assert pool._idle == []
        pool.close()  # takes the lock

    with held_by_another_thread(lambda: pool._lock):
        fork_child(child)()
    assert pool._idle == [parents]


def test_a_pool_renews_itself_after_a_fork_that_ran_no_at_fork_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the process id changed and the at-fork hook did not run (a fork made outside
    ``os.fork``), ``take`` still forgets the parent's idle connections and makes its own."""
    pool = _pg.Pool("postgresql:///x")
    parents, own = SimpleNamespace(closed=False), SimpleNamespace(closed=False)
    pool._idle.append(parents)
    monkeypatch.setattr(pool, "_connect", lambda: own)
    assert pool.take() is parents  # the same process
    pool._idle.append(parents)
    pool._pid = -1  # as in a child the hook missed
    assert pool.take() is own
    assert pool._idle == [] and pool._pid == os.getpid() and pool._mine == {id(own)}


def test_a_connection_lent_before_a_fork_is_never_lent_again_in_the_child(
    postgres_url: str,
) -> None:
    """A connection lent before a fork and given back healthy in the child is not pooled
    there (it was lent to the child's next borrower: two processes on one socket)."""
    pool = _pg.Pool(postgres_url)
    lent = pool.take()
    session = lent.info.backend_pid

    def child() -> None:
        own = pool.take()
        pool.give(own, healthy=True)
        pool.give(lent, healthy=True)
        assert pool._idle == [own]
        assert pool.take() is own
        assert own.execute("SELECT pg_backend_pid()").fetchone() != (session,)

    fork_child(child)()
    assert lent.execute("SELECT 1, pg_backend_pid()").fetchone() == (1, session)
    pool.give(lent, healthy=True)
    assert pool.take() is lent
    pool.give(lent, healthy=True)
    pool.close()
    assert lent.closed and pool._idle == []


def test_a_connection_lent_before_a_fork_is_not_closed_by_the_child(postgres_url: str) -> None:
    """A connection lent before a fork and given back unhealthy in the child is dropped, not
    closed: closing it sent the parent's session its termination, and the parent's next
    query on it failed."""
    pool = _pg.Pool(postgres_url)
    lent = pool.take()
    session = lent.info.backend_pid

    def child() -> None:
        pool.give(lent, healthy=False)
        assert not lent.closed and pool._idle == []

    fork_child(child)()
    assert lent.execute("SELECT 1, pg_backend_pid()").fetchone() == (1, session)
    pool.give(lent, healthy=False)
    assert lent.closed and pool._idle == []
