"""Private: the SQLite node store (DESIGN section 3; public face :mod:`merkle_memory.dag.store`).

Schema (``PRAGMA user_version = 2``)::

    CREATE TABLE nodes (
        seq         INTEGER PRIMARY KEY,  -- insertion order, 1-based
        hash        TEXT NOT NULL UNIQUE, -- 64-char lowercase hex node id
        parent_hash TEXT,                 -- parent id, NULL for a root
        role        TEXT NOT NULL,        -- bucket role, denormalized for display
        bucket      TEXT NOT NULL,        -- RFC 8785 JSON of Bucket.to_dict() (unprojected)
        metadata    TEXT NOT NULL         -- RFC 8785 JSON of the node metadata (not hashed)
    );
    CREATE INDEX nodes_parent ON nodes (parent_hash, seq);
    CREATE TABLE pruned (                 -- version 2: nodes whose content was forgotten
        hash      TEXT PRIMARY KEY,       -- the node's hash (its row's bucket has no content)
        pruned_at TEXT NOT NULL,          -- UTC, YYYY-MM-DDTHH:MM:SS.ffffffZ
        reason    TEXT NOT NULL           -- free text given to forget
    );

Version 2 adds the ``pruned`` table (issue 20) and the transcript archive of ``dag sync``
(raw file bytes and sync progress: :mod:`merkle_memory.dag._archive`, issue 17). The only
migration is additive: a version 1 store is upgraded when it is opened for writing (every
missing table added and version 2 set in one transaction; nothing else changes), or by the
first :meth:`SQLiteNodeStore.forget` (inside its transaction) when it was opened with
``create=False``. Opened for reading, a version 1 store is left as it is and reads as a
store with no pruned node and nothing archived.

There is no foreign key on ``parent_hash``: a dangling parent must stay representable so that
``dag verify`` can report it (tapes' old schema used ``ON DELETE SET NULL``, which silently
turns an orphan into a root). The bucket is stored unprojected, so the hash can be recomputed
from it exactly as the importer computed it.

Durability: WAL journal, ``synchronous = FULL``; :meth:`SQLiteNodeStore.put_many` is one
``BEGIN IMMEDIATE ... COMMIT`` transaction, so a crash keeps all of an import or none of it,
and two importing processes serialize on SQLite's write lock. A new store file is built
under a temporary name and linked into place, so a store path never exists without its
schema; reading (``create=False``) never writes into a file that has no schema.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from .. import canonical
from .._fsio import fsync_dir
from ..errors import MerkleMemoryError, NodeStoreError
from ._archive import ARCHIVE_SCHEMA, SQLITE, ArchiveStore, Session, Sql
from ._node import Node
from ._store_base import StoredRow, row_to_node, stored_row

__all__ = ["SCHEMA_VERSION", "SQLiteNodeStore"]

SCHEMA_VERSION: Final = 2
_READABLE_VERSIONS: Final = (1, 2)
_COLUMNS: Final = "hash, parent_hash, role, bucket, metadata"
_PRUNED_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS pruned (
    hash      TEXT PRIMARY KEY,
    pruned_at TEXT NOT NULL,
    reason    TEXT NOT NULL
)"""
_SCHEMA: Final = (
    """
CREATE TABLE IF NOT EXISTS nodes (
    seq         INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    parent_hash TEXT,
    role        TEXT NOT NULL,
    bucket      TEXT NOT NULL,
    metadata    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes (parent_hash, seq);
"""
    + _PRUNED_SCHEMA
    + ";"
    + ARCHIVE_SCHEMA
)
_BUSY_TIMEOUT_S: Final = 30.0


def _install_schema(db: sqlite3.Connection) -> None:
    """Create the tables (those missing: this also upgrades a version 1 store) and set
    ``user_version``, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _create_file(path: Path) -> None:
    """Create a new store at ``path`` so that ``path`` never exists without its schema.

    The store is built under ``.NAME.creating-PID`` beside it, made durable, and hard-linked
    into place (a process killed meanwhile leaves at most that temporary file; a store another
    process created first is kept). Where hard links are not possible the schema is written in
    place, as for an existing empty file.

    Raises:
        NodeStoreError: the folder cannot hold the file.
    """
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # a leftover of this same pid only
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
            _install_schema(db)
        finally:
            db.close()  # the last connection checkpoints and removes the -wal file
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # created by another process meanwhile: use it
        except OSError:
            return  # no hard links here: the caller creates the schema in place
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)
    except (sqlite3.Error, OSError) as exc:
        raise NodeStoreError(f"cannot create node store {path}: {exc}") from exc


class SQLiteNodeStore(ArchiveStore):
    """A node store in one SQLite file (created with its schema if missing).

    Args:
        path: the database file; ``":memory:"`` for a throwaway in-memory database.
        create: when ``False`` (reading commands), refuse to create a missing file, and
            refuse an existing file without the node store schema (an empty file, another
            SQLite database) instead of writing the schema into it.

    Raises:
        NodeStoreError: the file is missing or has no node store schema (with
            ``create=False``), is not an SQLite database, holds a schema of another version,
            or cannot be opened. Nothing is written to the file before these checks.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).is_file():
            raise NodeStoreError(f"no node store at {self.path}")
        if create and self.path != ":memory:" and not os.path.lexists(self.path):
            _create_file(Path(self.path))
        try:
            self._db = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=True
            )
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot open node store {self.path}: {exc}") from exc
        try:
            # Read before writing anything: a file that is not a node store is left untouched.
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, *_READABLE_VERSIONS):
                raise NodeStoreError(
                    f"{self.path}: node store schema version {version}, "
                    f"this library reads versions 1 to {SCHEMA_VERSION}"
                )
            if version == 0 and not create and self.path != ":memory:":
                raise NodeStoreError(f"{self.path} is not a node store (no schema)")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            if version == 0 or (version < SCHEMA_VERSION and create):
                _install_schema(self._db)  # a new store, or an older one opened for writing
                version = SCHEMA_VERSION
            self.schema_version: int = int(version)
        except sqlite3.Error as exc:
            self._db.close()
            raise NodeStoreError(f"{self.path} is not a usable node store: {exc}") from exc
        except BaseException:
            self._db.close()
            raise

    @property
    def location(self) -> str:
        """The database file (``":memory:"`` for an in-memory store)."""
        return self.path

    def owns(self, path: str) -> bool:
        """Whether ``path`` (absolute) is the database file, its ``-wal``, ``-shm`` or
        ``-journal`` companion, or a store being created beside it (``.NAME.creating-PID``)."""
        if self.path == ":memory:":
            return False
        base = os.path.abspath(self.path)
        if path in (base, base + "-wal", base + "-shm", base + "-journal"):
            return True
        return os.path.basename(path).startswith(f".{os.path.basename(base)}.creating-")

    @contextlib.contextmanager
    def _session(self, kind: Session) -> Iterator[Sql]:
        """See :meth:`ArchiveStore._session`: ``put`` and ``write`` are one ``BEGIN
        IMMEDIATE ... COMMIT`` transaction (writers serialize on SQLite's write lock);
        ``read`` and ``snapshot`` read in autocommit mode."""
        writing = kind in ("put", "write")
        try:
            if not writing:
                yield Sql(self._db, SQLITE)
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield Sql(self._db, SQLITE)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            doing = "write" if writing else "read"
            raise NodeStoreError(f"cannot {doing} node store {self.path}: {exc}") from exc

    def _upgrade(self, db: Sql) -> None:
        """See :meth:`ArchiveStore._upgrade`: every missing table, and ``user_version`` 2."""
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.conn.execute(statement)
        db.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.schema_version = SCHEMA_VERSION

    @staticmethod
    def _encode(node: Node) -> tuple[str, str | None, str, str, str]:
        """See :meth:`ArchiveStore._encode` (the role as text)."""
        if not isinstance(node, Node):
            raise NodeStoreError(f"can only store a Node, not {type(node).__name__}")
        try:
            bucket = node.bucket.to_json().decode("utf-8")
            metadata = canonical.dumps(dict(node.metadata)).decode("utf-8")
        except MerkleMemoryError as exc:
            raise NodeStoreError(f"node {node.hash} cannot be stored: {exc}") from exc
        return node.hash, node.parent_hash, node.bucket.role, bucket, metadata

    # -- reading ---------------------------------------------------------------------------

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        try:
            cursor = self._db.execute(sql, args)
            while True:
                batch = cursor.fetchmany(512)
                if not batch:
                    return
                yield from batch
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot read node store {self.path}: {exc}") from exc

    def _nodes(self, where: str, args: tuple[Any, ...] = ()) -> list[Node]:
        sql = f"SELECT {_COLUMNS} FROM nodes {where} ORDER BY seq"
        return [row_to_node(row) for row in self._query(sql, args)]

    def get(self, node_hash_hex: str) -> Node | None:
        """See :meth:`NodeStore.get`."""
        found = self._nodes("WHERE hash = ?", (node_hash_hex,))
        return found[0] if found else None

    def __contains__(self, node_hash_hex: object) -> bool:
        if not isinstance(node_hash_hex, str):
            return False
        sql = "SELECT 1 FROM nodes WHERE hash = ?"
        return any(True for _ in self._query(sql, (node_hash_hex,)))

    def hashes_with_prefix(self, prefix: str) -> Iterator[str]:
        """See :meth:`NodeStore.hashes_with_prefix`: answered from the hash index."""
        # Hex prefixes sort contiguously: every match is >= prefix and < prefix + "g".
        sql = "SELECT hash FROM nodes WHERE hash >= ? AND hash < ? ORDER BY hash"
        return (str(row[0]) for row in self._query(sql, (prefix, prefix + "g")))

    def children(self, node_hash_hex: str) -> list[Node]:
        """See :meth:`NodeStore.children`."""
        return self._nodes("WHERE parent_hash = ?", (node_hash_hex,))

    def roots(self) -> list[Node]:
        """See :meth:`NodeStore.roots` (a stored ``""`` parent counts as none)."""
        return self._nodes("WHERE parent_hash IS NULL OR parent_hash = ''")

    def leaves(self) -> list[Node]:
        """See :meth:`NodeStore.leaves`."""
        return self._nodes(
            "AS n WHERE NOT EXISTS (SELECT 1 FROM nodes AS c WHERE c.parent_hash = n.hash)"
        )

    def __iter__(self) -> Iterator[Node]:
        for row in self._query(f"SELECT {_COLUMNS} FROM nodes ORDER BY seq"):
            yield row_to_node(row)

    def __len__(self) -> int:
        return int(next(self._query("SELECT count(*) FROM nodes"))[0])

    def rows(self) -> Iterator[StoredRow]:
        """See :meth:`NodeStore.rows`; a bucket that does not parse is given as ``None``, and
        ``problem`` says why :meth:`get` could not read the row (every column it reads is
        tried: bucket, metadata, hash and parent hash) or that the ``role`` column differs
        from the bucket's role; ``pruned`` whether the ``pruned`` table names the node."""
        if self.schema_version >= 2:
            sql = (
                "SELECT n.hash, n.parent_hash, n.role, n.bucket, n.metadata, p.hash IS NOT NULL"
                " FROM nodes AS n LEFT JOIN pruned AS p ON p.hash = n.hash ORDER BY n.seq"
            )
        else:
            sql = f"SELECT {_COLUMNS}, 0 FROM nodes ORDER BY seq"
        for *row, pruned in self._query(sql):
            yield stored_row(tuple(row), bool(pruned))

    # -- forgetting ------------------------------------------------------------------------

    def forget(
        self,
        node_hash_hex: str,
        reason: str = "",
        *,
        purge: Sequence[tuple[str, int]] | None = None,
    ) -> bool:
        """See :meth:`ArchiveStore.forget` (one ``BEGIN IMMEDIATE ... COMMIT`` transaction).

        ``PRAGMA secure_delete`` is on for the transaction, so SQLite overwrites the old
        bytes it frees with zeros, and the WAL is checkpointed and truncated after the commit
        (``wal_checkpoint(TRUNCATE)``), so the old content is in neither file afterwards
        (unless another connection reading at that moment keeps the checkpoint from
        finishing; the next write's checkpoint then does). Copies outside the store
        (backups, the transcripts imported) are not touched.
        """
        try:
            self._db.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot write node store {self.path}: {exc}") from exc
        done = super().forget(node_hash_hex, reason, purge=purge)
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot write node store {self.path}: {exc}") from exc
        return done

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()
