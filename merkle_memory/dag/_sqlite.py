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

import dataclasses
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, cast

from .. import canonical
from .._fsio import fsync_dir
from ..errors import MerkleMemoryError, NodeNotFoundError, NodeStoreError
from ._archive import (
    ARCHIVE_SCHEMA,
    ArchivedFile,
    FileState,
    FileUpdate,
    KeyLookup,
    archived_files,
    archived_versions,
    load_states,
    purge_versions,
    read_version,
    write_update,
)
from ._node import Bucket, Node
from ._store_base import NodeStore, StoredRow

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


def _row_to_node(row: tuple[Any, ...]) -> Node:
    """The node of a stored row, as :meth:`SQLiteNodeStore.get` reads it (the ``role`` column
    is not read: the bucket holds the role).

    Raises:
        NodeStoreError: a column cannot be read (``... cannot be read: <column>: <why>``).
    """
    node_hex, parent, _role, bucket, metadata = row
    column = "bucket"
    try:
        parsed = Bucket.from_dict(cast("Any", canonical.loads(bucket)))  # it checks the type
        column = "metadata"
        meta = cast("Any", canonical.loads(metadata))  # Node checks it is an object
        column = "row"  # hash and parent hash shapes, metadata an object
        return Node(hash=node_hex, parent_hash=parent or None, bucket=parsed, metadata=meta)
    except MerkleMemoryError as exc:
        raise NodeStoreError(f"stored node {node_hex!r} cannot be read: {column}: {exc}") from exc


def _row_problem(row: tuple[Any, ...]) -> str | None:
    """Why :meth:`SQLiteNodeStore.get` cannot read a stored row, or why its ``role`` column
    disagrees with its bucket; ``None`` for a sound row."""
    try:
        node = _row_to_node(row)
    except NodeStoreError as exc:  # the reason without the "stored node ..." prefix
        return str(exc).removeprefix(f"stored node {row[0]!r} cannot be read: ")
    role = row[2]
    if role != node.bucket.role:
        return f"stored role {role!r} differs from the bucket's role {node.bucket.role!r}"
    return None


def _now() -> str:
    t = datetime.now(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}Z"


class SQLiteNodeStore(NodeStore):
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

    # -- writing ---------------------------------------------------------------------------

    @staticmethod
    def _encode(node: Node) -> tuple[str, str | None, str, str, str]:
        if not isinstance(node, Node):
            raise NodeStoreError(f"can only store a Node, not {type(node).__name__}")
        try:
            bucket = node.bucket.to_json().decode("utf-8")
            metadata = canonical.dumps(dict(node.metadata)).decode("utf-8")
        except MerkleMemoryError as exc:
            raise NodeStoreError(f"node {node.hash} cannot be stored: {exc}") from exc
        return node.hash, node.parent_hash, node.bucket.role, bucket, metadata

    def put(self, node: Node) -> bool:
        """See :meth:`NodeStore.put` (one transaction)."""
        return self.put_many((node,)) == 1

    def put_many(self, nodes: Iterable[Node]) -> int:
        """See :meth:`NodeStore.put_many`: one transaction, committed only at the end.

        ``nodes`` may be a generator; it is consumed inside the transaction, and an exception
        it raises rolls the whole call back.
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self._has_provisional():
                    nodes = self._settled(nodes)
                cursor = self._db.executemany(
                    f"INSERT OR IGNORE INTO nodes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                    (self._encode(node) for node in nodes),
                )
                inserted = max(cursor.rowcount, 0)  # summed over the rows by sqlite3
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot write node store {self.path}: {exc}") from exc
        return inserted

    def _has_provisional(self) -> bool:
        if self.schema_version < 2:
            return False
        return self._db.execute("SELECT 1 FROM provisional LIMIT 1").fetchone() is not None

    def _settled(self, nodes: Iterable[Node]) -> Iterator[Node]:
        """``nodes``, each made permanent as it passes (its provisional rows deleted): a node
        stored by ``put`` is never removed by a later sync."""
        for node in nodes:
            if isinstance(node, Node):
                self._db.execute("DELETE FROM provisional WHERE hash = ?", (node.hash,))
            yield node

    # -- the transcript archive (dag sync) --------------------------------------------------

    def _need_archive(self) -> None:
        if self.schema_version < 2:
            raise NodeStoreError(
                f"{self.path}: node store schema version {self.schema_version} has no archive "
                "(open it for writing, e.g. with dag sync, to upgrade it)"
            )

    def file_states(self) -> dict[str, FileState]:
        """What the store remembers of every synced file, by absolute path (one query).

        Raises:
            NodeStoreError: the store cannot be read. (A version 1 store read without
                upgrading has no archive: ``{}``.)
        """
        if self.schema_version < 2:
            return {}
        try:
            return load_states(self._db)
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot read node store {self.path}: {exc}") from exc

    def sync_keys(self, state: FileState) -> KeyLookup:
        """The keys the synced parts of a file resolved (key -> hash), looked up lazily."""
        return KeyLookup(self._db, state.file_id)

    def sync_file(self, update: FileUpdate) -> int | None:
        """Write one file's sync (:meth:`sync_files` of one update); return its new nodes
        (``None``: not written, its row changed since ``update.base``)."""
        return self.sync_files((update,))[0]

    def sync_files(self, updates: Sequence[FileUpdate]) -> list[int | None]:
        """Write files' syncs in one ``BEGIN IMMEDIATE ... COMMIT`` transaction: for each,
        in order, its archived chunks, its nodes (keeping the provisional rows of its open
        tail and deleting its stale provisional nodes), the keys later parts may name, and
        its ``files`` row. A crash keeps all of it or none of it.

        Returns:
            For each update, how many of its nodes were new to the store, or ``None`` for an
            update not written because another sync committed its file first (its ``files``
            row differs from :attr:`FileUpdate.base`).

        Raises:
            NodeStoreError: the store cannot be written, has no archive tables, or a node
                cannot be stored (nothing of this call is kept).
        """
        self._need_archive()
        sql = f"INSERT OR IGNORE INTO nodes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)"

        def insert(node: Node) -> bool:
            return self._db.execute(sql, self._encode(node)).rowcount == 1

        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                new = [write_update(self._db, u, insert, self._encode) for u in updates]
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot write node store {self.path}: {exc}") from exc
        return new

    def archived_files(self) -> list[ArchivedFile]:
        """Every archived file, by path (``[]`` for a version 1 store read as it is).

        Raises:
            NodeStoreError: the store cannot be read.
        """
        if self.schema_version < 2:
            return []
        try:
            return archived_files(self._db)
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot read node store {self.path}: {exc}") from exc

    def archived_versions(self) -> list[tuple[str, str | None, int]]:
        """``(path, format, 1-based version)`` of every archived version whose bytes are kept
        (not purged by :meth:`forget`), by path and version (``[]`` for a version 1 store).

        Raises:
            NodeStoreError: the store cannot be read.
        """
        if self.schema_version < 2:
            return []
        try:
            return archived_versions(self._db)
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot read node store {self.path}: {exc}") from exc

    def archived_bytes(self, path: str, version: int | None = None) -> Iterator[bytes]:
        """The bytes of an archived file (its latest version, or ``version``, 1-based), in
        chunks, each checked against its SHA-256 and the whole against the version's.

        Raises:
            NodeStoreError: no such archived file or version, or archived bytes that are
                missing, corrupt or do not match their digests (raised when reached: write
                the chunks somewhere temporary and keep them only at the end).
        """
        self._need_archive()
        try:
            yield from read_version(self._db, path, version)
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot read node store {self.path}: {exc}") from exc

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
        return [_row_to_node(row) for row in self._query(sql, args)]

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
            yield _row_to_node(row)

    def __len__(self) -> int:
        return int(next(self._query("SELECT count(*) FROM nodes"))[0])

    def rows(self) -> Iterator[StoredRow]:
        """See :meth:`NodeStore.rows`; a bucket that does not parse is given as ``None``, and
        ``problem`` says why :meth:`get` could not read the row (every column it reads is
        tried: bucket, metadata, hash and parent hash) or that the ``role`` column differs
        from the bucket's role; ``pruned`` whether the ``pruned`` table names the node."""
        if self._has_pruned_table():
            sql = (
                "SELECT n.hash, n.parent_hash, n.role, n.bucket, n.metadata, p.hash IS NOT NULL"
                " FROM nodes AS n LEFT JOIN pruned AS p ON p.hash = n.hash ORDER BY n.seq"
            )
        else:
            sql = f"SELECT {_COLUMNS}, 0 FROM nodes ORDER BY seq"
        for *row, pruned in self._query(sql):
            node_hex, parent, role, bucket, _metadata = row
            try:
                parsed = canonical.loads(bucket)
            except MerkleMemoryError:
                parsed = None
            yield StoredRow(
                str(node_hex),
                str(parent) if parent else None,
                parsed,
                str(role),
                problem=_row_problem(tuple(row)),
                pruned=bool(pruned),
            )

    # -- forgetting ------------------------------------------------------------------------

    def _has_pruned_table(self) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pruned'"
        return any(True for _ in self._query(sql))

    def is_pruned(self, node_hash_hex: str) -> bool:
        """See :meth:`NodeStore.is_pruned`."""
        if not self._has_pruned_table():
            return False
        return any(
            True for _ in self._query("SELECT 1 FROM pruned WHERE hash = ?", (node_hash_hex,))
        )

    def forget(
        self,
        node_hash_hex: str,
        reason: str = "",
        *,
        purge: Sequence[tuple[str, int]] | None = None,
    ) -> bool:
        """See :meth:`NodeStore.forget`: one ``BEGIN IMMEDIATE ... COMMIT`` transaction.

        A store that archives transcripts (``dag sync``) keeps the raw bytes the node was
        read from: ``purge`` names the archived versions to delete in the same transaction,
        as ``(path, 1-based version)`` (:func:`merkle_memory.transcripts.forget_node` finds
        the versions whose import gives the node and calls this). Their chunk lists and
        every chunk no other version uses are deleted and
        each version is recorded as purged (``archived_bytes`` of it then raises, naming the
        node, the time and the reason); a purged latest version makes the next sync of its
        file, if it still exists, archive it whole as a new version. ``purge=()`` keeps the
        archive as it is; ``None`` (the default) is refused on a store that archives files,
        so its forgotten text is never left there by mistake. The node's provisional rows are
        deleted (a pruned node is never deleted by a later sync).

        The row's bucket is rewritten without content (type, role, model, provider and agent
        name kept; metadata kept) and a ``pruned`` row added (the table, and schema version
        2, are created here on a version 1 store). ``PRAGMA secure_delete`` is on for the
        transaction, so SQLite overwrites the old bytes it frees with zeros, and the WAL is
        checkpointed and truncated after the commit (``wal_checkpoint(TRUNCATE)``), so the
        old content is in neither file afterwards (unless another connection reading at that
        moment keeps the checkpoint from finishing; the next write's checkpoint then does).
        Copies outside the store (backups, the transcripts imported) are not touched.

        Raises:
            NodeNotFoundError: no such node.
            NodeStoreError: ``reason`` is not a string, the stored bucket cannot be read,
                ``purge`` is ``None`` on a store that archives files or names an unknown
                archived file or version, or the store cannot be written (nothing changes).
        """
        if type(reason) is not str:
            raise NodeStoreError(f"a reason is a string, not {type(reason).__name__}")
        if purge is None and self.archived_files():
            raise NodeStoreError(
                f"{self.path} archives transcripts (dag sync): say which archived versions "
                "to purge (transcripts.forget_node, or purge=() to keep them)"
            )
        targets = [(str(path), int(version)) for path, version in (purge or ())]
        try:
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                done = self._forget_locked(node_hash_hex, reason)
                if targets:
                    purge_versions(self._db, targets, node_hash_hex, _now(), reason)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise NodeStoreError(f"cannot write node store {self.path}: {exc}") from exc
        return done

    def _forget_locked(self, node_hash_hex: str, reason: str) -> bool:
        """The body of :meth:`forget`, inside its transaction."""
        found = self._db.execute(
            "SELECT bucket FROM nodes WHERE hash = ?", (node_hash_hex,)
        ).fetchone()
        if found is None:
            raise NodeNotFoundError(f"no node {node_hash_hex} in {self.path}", node_hash_hex)
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:  # a version 1 store opened read-only: upgrade it here
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.schema_version = SCHEMA_VERSION
        self._db.execute("DELETE FROM provisional WHERE hash = ?", (node_hash_hex,))
        known = "SELECT 1 FROM pruned WHERE hash = ?"
        if self._db.execute(known, (node_hash_hex,)).fetchone() is not None:
            return False
        try:
            stored = canonical.loads(found[0])
            if not isinstance(stored, dict):
                raise NodeStoreError(f"stored node {node_hash_hex} is not a JSON object")
            bucket = Bucket.from_dict(stored)
        except MerkleMemoryError as exc:
            raise NodeStoreError(
                f"stored node {node_hash_hex} cannot be read, so it is not pruned: {exc}"
            ) from exc
        empty = dataclasses.replace(bucket, content=()).to_json().decode("utf-8")
        self._db.execute("UPDATE nodes SET bucket = ? WHERE hash = ?", (empty, node_hash_hex))
        self._db.execute(
            "INSERT INTO pruned (hash, pruned_at, reason) VALUES (?, ?, ?)",
            (node_hash_hex, _now(), reason),
        )
        return True

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()
