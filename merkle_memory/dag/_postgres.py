"""Private: the PostgreSQL node store (public face :mod:`merkle_memory.dag.store`).

Opened by :func:`~merkle_memory.dag.store.open_store` with a ``postgresql://`` URL (libpq's
URI form, no fragment; the extra ``postgres``). Schema (component ``nodes`` version 2 in
``mm_schema``), the SQLite store's tables in PostgreSQL types, each name prefixed ``mm_``::

    CREATE TABLE mm_nodes (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- insertion order
        hash        text COLLATE "C" NOT NULL UNIQUE,  -- 64-char lowercase hex node id
        parent_hash text COLLATE "C",                  -- parent id, NULL for a root
        role        bytea NOT NULL,                    -- bucket role (UTF-8), for display
        bucket      text NOT NULL,     -- RFC 8785 JSON of Bucket.to_dict() (unprojected)
        metadata    text NOT NULL      -- RFC 8785 JSON of the node metadata (not hashed)
    );
    CREATE INDEX mm_nodes_parent ON mm_nodes (parent_hash, seq);
    -- version 2: the pruned markers and the transcript archive of dag sync
    mm_pruned, mm_files, mm_versions, mm_chunks, mm_file_chunks, mm_sync_keys,
    mm_provisional, mm_purged_versions  (see _ARCHIVE below and docs/FORMAT.md section 13)

Version 2 is additive: a version 1 database is upgraded when it is opened for writing (the
missing tables created and the version set in one transaction, under the schema lock), or by
the first :meth:`~PostgresNodeStore.forget` (inside its transaction) when it was opened for
reading; read as it is, a version 1 store has no pruned node and nothing archived. A path is
kept as ``bytea`` (its exact bytes), a sync key and a reason as ``bytea`` (UTF-8; ``text``
cannot hold a NUL), a device and an inode as ``numeric(20)`` (unsigned 64-bit).

As in SQLite there is no foreign key on ``parent_hash`` (a dangling parent stays representable
for ``dag verify``), and the bucket is stored unprojected. ``role`` is ``bytea`` because a role
may hold a NUL, which PostgreSQL ``text`` cannot (RFC 8785 escapes it in the JSON columns).
The hashes use the ``"C"`` collation so a hex prefix is one index range whatever the
database's locale. Many stores can share a server: one per database, or one per schema (a URL
``options=-csearch_path=NAME``).

Durability: :meth:`PostgresNodeStore.put_many` is one transaction committed with
``synchronous_commit = on``, so an import is kept whole or not at all, and concurrent importers
of the same nodes never duplicate one (``ON CONFLICT (hash) DO NOTHING``). A sync
(:meth:`~PostgresNodeStore.sync_files`) and a forget take the store's advisory lock
exclusively and an import takes it shared, so archive writes serialize as SQLite's ``BEGIN
IMMEDIATE`` makes them. Reading walks the table in pages of ``seq`` (no transaction is held
open between pages); the archive is read in one ``REPEATABLE READ`` snapshot per call.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, TypeVar

from .. import _pg, canonical
from ..errors import DatabaseError, MerkleMemoryError, NodeStoreError
from ._archive import POSTGRES, ArchiveStore, Session, Sql
from ._node import Node
from ._store_base import StoredRow, row_to_node, stored_row

__all__ = ["SCHEMA_VERSION", "PostgresNodeStore"]

SCHEMA_VERSION: Final = 2
_READABLE_VERSIONS: Final = (1, 2)
_COLUMNS: Final = "hash, parent_hash, role, bucket, metadata"
_PAGE: Final = 2000
_NODES: Final = (
    "CREATE TABLE IF NOT EXISTS mm_schema (component text PRIMARY KEY, version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS mm_nodes (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        hash        text COLLATE "C" NOT NULL UNIQUE,
        parent_hash text COLLATE "C",
        role        bytea NOT NULL,
        bucket      text NOT NULL,
        metadata    text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS mm_nodes_parent ON mm_nodes (parent_hash, seq)",
)
_ARCHIVE: Final = (
    """CREATE TABLE IF NOT EXISTS mm_pruned (
        hash      text COLLATE "C" PRIMARY KEY,
        pruned_at text NOT NULL,
        reason    bytea NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mm_files (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        path        bytea NOT NULL UNIQUE,
        format      text,
        device      numeric(20) NOT NULL,
        inode       numeric(20) NOT NULL,
        size        bigint NOT NULL,
        mtime_ns    bigint NOT NULL,
        digest      text NOT NULL,
        version     integer NOT NULL,
        resume      text NOT NULL,
        first_sync  double precision NOT NULL,
        last_sync   double precision NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mm_versions (
        file_id     bigint NOT NULL,
        version     integer NOT NULL,
        size        bigint NOT NULL,
        digest      text NOT NULL,
        first_sync  double precision NOT NULL,
        last_sync   double precision NOT NULL,
        PRIMARY KEY (file_id, version)
    )""",
    """CREATE TABLE IF NOT EXISTS mm_chunks (
        id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        digest  text COLLATE "C" NOT NULL UNIQUE,
        size    bigint NOT NULL,
        data    bytea NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS mm_file_chunks (
        file_id  bigint NOT NULL,
        version  integer NOT NULL,
        seq      integer NOT NULL,
        "offset" bigint NOT NULL,
        digest   text COLLATE "C" NOT NULL,
        PRIMARY KEY (file_id, version, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS mm_sync_keys (
        file_id bigint NOT NULL,
        key     bytea NOT NULL,
        hash    text COLLATE "C",
        PRIMARY KEY (file_id, key)
    )""",
    """CREATE TABLE IF NOT EXISTS mm_provisional (
        hash    text COLLATE "C" NOT NULL,
        file_id bigint NOT NULL,
        PRIMARY KEY (hash, file_id)
    )""",
    "CREATE INDEX IF NOT EXISTS mm_provisional_file ON mm_provisional (file_id)",
    """CREATE TABLE IF NOT EXISTS mm_purged_versions (
        file_id   bigint NOT NULL,
        version   integer NOT NULL,
        node      text NOT NULL,
        purged_at text NOT NULL,
        reason    bytea NOT NULL,
        PRIMARY KEY (file_id, version)
    )""",
)
_SCHEMA: Final = (
    *_NODES,
    *_ARCHIVE,
    f"INSERT INTO mm_schema VALUES ('nodes', {SCHEMA_VERSION}) ON CONFLICT (component) "
    "DO UPDATE SET version = excluded.version",
)
"""A new store, or the upgrade of a version 1 store (every statement is idempotent)."""
_SCHEMA_LOCK: Final = _pg.INSTALLER_LOCK  # one installer of any of the package's tables
_WRITE_LOCK: Final = 0x6D6D0002  # advisory lock key: sync and forget exclusive, put shared

_T = TypeVar("_T")


def schema_version(conn: Any, component: str) -> int | None:
    """The installed version of ``component`` in ``mm_schema``, or ``None`` when absent."""
    if conn.execute("SELECT to_regclass('mm_schema')").fetchone()[0] is None:
        return None
    row = conn.execute("SELECT version FROM mm_schema WHERE component = %s", (component,))
    found = row.fetchone()
    return None if found is None else int(found[0])


def install_schema(conn: Any, statements: Iterable[str]) -> None:
    """Run ``statements`` in one transaction, serialized against other installers."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in statements:
            conn.execute(statement)


def _role(raw: Any) -> str:
    return bytes(raw).decode("utf-8", "replace")


class PostgresNodeStore(ArchiveStore):
    """A node store in a PostgreSQL database (tables ``mm_nodes``, the archive's ``mm_*``
    and ``mm_schema``).

    Args:
        url: ``postgresql://...`` in libpq's URI form, without a fragment.
        create: install the schema when it is missing, or upgrade a version 1 schema; when
            ``False`` (reading commands) a database without it is refused and nothing is
            written to it (a version 1 schema is read as it is).

    Raises:
        NodeStoreError: the URL has a fragment, the driver is not installed, the server
            cannot be reached, the schema is missing (``create=False``) or of another version.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        conninfo, fragment = _pg.split_url(url)
        if fragment is not None:
            raise NodeStoreError(
                f"a node store URL names a database, not a tenant: drop '#{fragment}'"
            )
        self.url = _pg.redact(conninfo)
        try:
            self._pool = _pg.Pool(conninfo, max_idle=2)
        except DatabaseError as exc:
            raise NodeStoreError(str(exc)) from exc

        def check(conn: Any) -> int:
            version = schema_version(conn, "nodes")
            if version is None and not create:
                raise NodeStoreError(f"no node store at {self.url} (no schema)")
            if version is not None and version not in _READABLE_VERSIONS:
                raise NodeStoreError(
                    f"{self.url}: node store schema version {version}, "
                    f"this library reads versions 1 to {SCHEMA_VERSION}"
                )
            if version is None or (version < SCHEMA_VERSION and create):
                install_schema(conn, _SCHEMA)
                return SCHEMA_VERSION
            return version

        self.schema_version: int = self._run("open the node store", check)

    def __repr__(self) -> str:
        return f"PostgresNodeStore({self.url!r})"

    @property
    def location(self) -> str:
        """The URL, without its password."""
        return self.url

    def _run(self, doing: str, work: Callable[[Any], _T]) -> _T:
        """Run ``work(connection)``; driver failures become ``NodeStoreError``."""
        psycopg = _translated_driver()
        try:
            with self._pool.connection() as conn:
                return work(conn)
        except psycopg.Error as exc:
            raise NodeStoreError(str(_pg.translate(exc, self._pool.conninfo, doing))) from exc
        except DatabaseError as exc:
            raise NodeStoreError(str(exc)) from exc

    @contextlib.contextmanager
    def _session(self, kind: Session) -> Iterator[Sql]:
        """See :meth:`ArchiveStore._session`: ``put`` and ``write`` are one transaction
        holding the store's advisory lock (shared for ``put``, exclusive for ``write``),
        ``snapshot`` a ``REPEATABLE READ, READ ONLY`` transaction, ``read`` autocommit."""
        psycopg = _translated_driver()
        doing = "write the node store" if kind in ("put", "write") else "read the node store"
        try:
            with self._pool.connection() as conn:
                if kind == "read":
                    yield Sql(conn, POSTGRES)
                    return
                with conn.transaction():
                    if kind == "snapshot":
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    elif kind == "put":
                        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_WRITE_LOCK,))
                    else:
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                    yield Sql(conn, POSTGRES)
        except psycopg.Error as exc:
            raise NodeStoreError(str(_pg.translate(exc, self._pool.conninfo, doing))) from exc
        except DatabaseError as exc:
            raise NodeStoreError(str(exc)) from exc

    def _upgrade(self, db: Sql) -> None:
        """See :meth:`ArchiveStore._upgrade`: the version 2 tables and ``mm_schema``
        (under the schema lock, inside the caller's transaction)."""
        db.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in _SCHEMA:
            db.conn.execute(statement)
        self.schema_version = SCHEMA_VERSION

    # -- writing ---------------------------------------------------------------------------

    def _encode(self, node: Node) -> tuple[str, str | None, bytes, str, str]:
        """See :meth:`ArchiveStore._encode` (the role as UTF-8 bytes: it may hold a NUL)."""
        if not isinstance(node, Node):
            raise NodeStoreError(f"can only store a Node, not {type(node).__name__}")
        try:
            bucket = node.bucket.to_json().decode("utf-8")
            metadata = canonical.dumps(dict(node.metadata)).decode("utf-8")
        except MerkleMemoryError as exc:
            raise NodeStoreError(f"node {node.hash} cannot be stored: {exc}") from exc
        return node.hash, node.parent_hash, node.bucket.role.encode("utf-8"), bucket, metadata

    def forget(
        self,
        node_hash_hex: str,
        reason: str = "",
        *,
        purge: Sequence[tuple[str, int]] | None = None,
    ) -> bool:
        """See :meth:`ArchiveStore.forget` (one transaction holding the store's lock).

        PostgreSQL does not overwrite a row in place: the old version of the node's row, and
        of every purged chunk, stays in the table's files (and in the write-ahead log, its
        archive and backups) until ``VACUUM`` makes the space reusable and new rows reuse
        it; ``VACUUM FULL mm_nodes, mm_chunks`` rewrites the tables without them. Nothing
        this library reads returns the old content after the commit.
        """
        return super().forget(node_hash_hex, reason, purge=purge)

    # -- reading ---------------------------------------------------------------------------

    def _select(self, where: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = f"SELECT {_COLUMNS} FROM mm_nodes {where} ORDER BY seq"
        return self._run("read the node store", lambda conn: conn.execute(sql, args).fetchall())

    def _pages(self, *, pruned: bool = False) -> Iterator[list[tuple[Any, ...]]]:
        """Every row in ``seq`` order, a page (one query) at a time; with ``pruned``, each
        row ends with whether ``mm_pruned`` names it."""
        after = 0
        sql = f"SELECT seq, {_COLUMNS} FROM mm_nodes WHERE seq > %s ORDER BY seq LIMIT {_PAGE}"
        if pruned:
            sql = (
                "SELECT n.seq, n.hash, n.parent_hash, n.role, n.bucket, n.metadata,"
                " p.hash IS NOT NULL FROM mm_nodes AS n LEFT JOIN mm_pruned AS p"
                f" ON p.hash = n.hash WHERE n.seq > %s ORDER BY n.seq LIMIT {_PAGE}"
            )
        while True:
            page = self._run("read the node store", functools.partial(_fetch, sql, (after,)))
            if not page:
                return
            after = page[-1][0]
            yield [row[1:] for row in page]

    @staticmethod
    def _node(row: tuple[Any, ...]) -> Node:
        return row_to_node((row[0], row[1], _role(row[2]), row[3], row[4]))

    def get(self, node_hash_hex: str) -> Node | None:
        """See :meth:`NodeStore.get`."""
        found = self._select("WHERE hash = %s", (node_hash_hex,))
        return self._node(found[0]) if found else None

    def __contains__(self, node_hash_hex: object) -> bool:
        if not isinstance(node_hash_hex, str):
            return False
        sql = "SELECT 1 FROM mm_nodes WHERE hash = %s"
        return self._run(
            "read the node store",
            lambda conn: conn.execute(sql, (node_hash_hex,)).fetchone() is not None,
        )

    def hashes_with_prefix(self, prefix: str) -> Iterator[str]:
        """See :meth:`NodeStore.hashes_with_prefix`: one range of the hash index."""
        sql = "SELECT hash FROM mm_nodes WHERE hash >= %s AND hash < %s ORDER BY hash LIMIT 2"
        rows = self._run(
            "read the node store", lambda conn: conn.execute(sql, (prefix, prefix + "g")).fetchall()
        )
        return (str(row[0]) for row in rows)

    def children(self, node_hash_hex: str) -> list[Node]:
        """See :meth:`NodeStore.children`."""
        return [self._node(r) for r in self._select("WHERE parent_hash = %s", (node_hash_hex,))]

    def roots(self) -> list[Node]:
        """See :meth:`NodeStore.roots` (a stored ``""`` parent counts as none)."""
        where = "WHERE parent_hash IS NULL OR parent_hash = ''"
        return [self._node(r) for r in self._select(where)]

    def leaves(self) -> list[Node]:
        """See :meth:`NodeStore.leaves`."""
        where = "AS n WHERE NOT EXISTS (SELECT 1 FROM mm_nodes AS c WHERE c.parent_hash = n.hash)"
        return [self._node(r) for r in self._select(where)]

    def __iter__(self) -> Iterator[Node]:
        for page in self._pages():
            for row in page:
                yield self._node(row)

    def __len__(self) -> int:
        return int(
            self._run(
                "read the node store",
                lambda conn: conn.execute("SELECT count(*) FROM mm_nodes").fetchone()[0],
            )
        )

    def rows(self) -> Iterator[StoredRow]:
        """See :meth:`NodeStore.rows` (as the SQLite store gives them)."""
        with_pruned = self.schema_version >= 2
        for page in self._pages(pruned=with_pruned):
            for node_hex, parent, raw_role, bucket, metadata, *marked in page:
                row = (node_hex, parent, _role(raw_role), bucket, metadata)
                yield stored_row(row, bool(marked and marked[0]))

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()


def _fetch(sql: str, args: tuple[Any, ...], conn: Any) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, args).fetchall())


def _translated_driver() -> Any:
    """psycopg, or ``NodeStoreError`` naming the extra when it is not installed."""
    try:
        return _pg.driver()
    except DatabaseError as exc:
        raise NodeStoreError(str(exc)) from exc
