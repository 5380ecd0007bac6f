"""Private: the PostgreSQL node store (public face :mod:`merkle_memory.dag.store`).

Opened by :func:`~merkle_memory.dag.store.open_store` with a ``postgresql://`` URL (libpq's
URI form, no fragment; the extra ``postgres``). Schema (component ``nodes`` version 1 in
``mm_schema``), the SQLite store's columns in PostgreSQL types::

    CREATE TABLE mm_nodes (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- insertion order
        hash        text COLLATE "C" NOT NULL UNIQUE,  -- 64-char lowercase hex node id
        parent_hash text COLLATE "C",                  -- parent id, NULL for a root
        role        bytea NOT NULL,                    -- bucket role (UTF-8), for display
        bucket      text NOT NULL,     -- RFC 8785 JSON of Bucket.to_dict() (unprojected)
        metadata    text NOT NULL      -- RFC 8785 JSON of the node metadata (not hashed)
    );
    CREATE INDEX mm_nodes_parent ON mm_nodes (parent_hash, seq);

As in SQLite there is no foreign key on ``parent_hash`` (a dangling parent stays representable
for ``dag verify``), and the bucket is stored unprojected. ``role`` is ``bytea`` because a role
may hold a NUL, which PostgreSQL ``text`` cannot (RFC 8785 escapes it in the JSON columns).
The hashes use the ``"C"`` collation so a hex prefix is one index range whatever the
database's locale. Many stores can share a server: one per database, or one per schema (a URL
``options=-csearch_path=NAME``).

Durability: :meth:`PostgresNodeStore.put_many` is one transaction committed with
``synchronous_commit = on``, so an import is kept whole or not at all, and concurrent importers
of the same nodes never duplicate one (``ON CONFLICT (hash) DO NOTHING``). Reading walks the
table in pages of ``seq`` (no transaction is held open between pages).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

from .. import _pg, canonical
from ..errors import DatabaseError, MerkleMemoryError, NodeStoreError
from ._node import Node
from ._sqlite import _row_problem, _row_to_node
from ._store_base import NodeStore, StoredRow

__all__ = ["SCHEMA_VERSION", "PostgresNodeStore"]

SCHEMA_VERSION: Final = 1
_COLUMNS: Final = "hash, parent_hash, role, bucket, metadata"
_PAGE: Final = 2000
_SCHEMA: Final = (
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
    "INSERT INTO mm_schema VALUES ('nodes', 1) ON CONFLICT (component) DO NOTHING",
)
_SCHEMA_LOCK: Final = 0x6D6D0001  # advisory lock key: one schema installer at a time

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


class PostgresNodeStore(NodeStore):
    """A node store in a PostgreSQL database (tables ``mm_nodes`` and ``mm_schema``).

    Args:
        url: ``postgresql://...`` in libpq's URI form, without a fragment.
        create: install the schema when it is missing; when ``False`` (reading commands) a
            database without it is refused and nothing is written to it.

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

        def check(conn: Any) -> None:
            version = schema_version(conn, "nodes")
            if version is None and not create:
                raise NodeStoreError(f"no node store at {self.url} (no schema)")
            if version is None:
                install_schema(conn, _SCHEMA)
            elif version != SCHEMA_VERSION:
                raise NodeStoreError(
                    f"{self.url}: node store schema version {version}, "
                    f"this library reads version {SCHEMA_VERSION}"
                )

        self._run("open the node store", check)

    def __repr__(self) -> str:
        return f"PostgresNodeStore({self.url!r})"

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

    # -- writing ---------------------------------------------------------------------------

    @staticmethod
    def _encode(node: Node) -> tuple[str, str | None, bytes, str, str]:
        if not isinstance(node, Node):
            raise NodeStoreError(f"can only store a Node, not {type(node).__name__}")
        try:
            bucket = node.bucket.to_json().decode("utf-8")
            metadata = canonical.dumps(dict(node.metadata)).decode("utf-8")
        except MerkleMemoryError as exc:
            raise NodeStoreError(f"node {node.hash} cannot be stored: {exc}") from exc
        return node.hash, node.parent_hash, node.bucket.role.encode("utf-8"), bucket, metadata

    def put(self, node: Node) -> bool:
        """See :meth:`NodeStore.put` (one transaction)."""
        return self.put_many((node,)) == 1

    def put_many(self, nodes: Iterable[Node]) -> int:
        """See :meth:`NodeStore.put_many`: one transaction, committed (and flushed to the
        server's write-ahead log) only at the end; an exception raised by ``nodes`` or by the
        server rolls the whole call back."""

        def write(conn: Any) -> int:
            inserted = 0
            sql = (
                f"INSERT INTO mm_nodes ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (hash) DO NOTHING"
            )
            with conn.transaction(), conn.cursor() as cursor:
                batch: list[tuple[str, str | None, bytes, str, str]] = []
                for node in nodes:
                    batch.append(self._encode(node))
                    if len(batch) >= _PAGE:
                        cursor.executemany(sql, batch)
                        inserted += max(cursor.rowcount, 0)
                        batch = []
                if batch:
                    cursor.executemany(sql, batch)
                    inserted += max(cursor.rowcount, 0)
            return inserted

        return self._run("write the node store", write)

    # -- reading ---------------------------------------------------------------------------

    def _select(self, where: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = f"SELECT {_COLUMNS} FROM mm_nodes {where} ORDER BY seq"
        return self._run("read the node store", lambda conn: conn.execute(sql, args).fetchall())

    def _pages(self) -> Iterator[list[tuple[Any, ...]]]:
        """Every row in ``seq`` order, a page (one query) at a time."""
        after = 0
        sql = f"SELECT seq, {_COLUMNS} FROM mm_nodes WHERE seq > %s ORDER BY seq LIMIT {_PAGE}"
        while True:
            page = self._run("read the node store", functools.partial(_fetch, sql, (after,)))
            if not page:
                return
            after = page[-1][0]
            yield [row[1:] for row in page]

    @staticmethod
    def _node(row: tuple[Any, ...]) -> Node:
        return _row_to_node((row[0], row[1], _role(row[2]), row[3], row[4]))

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
        for page in self._pages():
            for node_hex, parent, raw_role, bucket, metadata in page:
                role = _role(raw_role)
                try:
                    parsed = canonical.loads(bucket)
                except MerkleMemoryError:
                    parsed = None
                yield StoredRow(
                    str(node_hex),
                    str(parent) if parent else None,
                    parsed,
                    role,
                    problem=_row_problem((node_hex, parent, role, bucket, metadata)),
                )

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
