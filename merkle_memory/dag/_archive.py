"""Private: the transcript archive and the pruned markers of a node store (SQLite schema
version 2, PostgreSQL component ``nodes`` version 2), written once for both databases.

``dag sync`` keeps, beside the nodes, every transcript file it read: the raw bytes (each
version of each file as a list of content-addressed, zlib-compressed chunks) and the sync
progress (what was consumed, where the next sync continues, the keys later lines may name).
In SQLite a path is stored as UTF-8 text, or, when it is not valid UTF-8 (a file name's bytes
that Python holds as lone surrogates, ``os.fsdecode``), as a BLOB of its exact bytes
(``os.fsencode``); in PostgreSQL always as ``bytea`` of its exact bytes (:class:`Dialect`,
:func:`py_path`). All of it is written in the transaction that writes the file's nodes
(:meth:`ArchiveStore.sync_files`), so a crash keeps a file's progress and its nodes
together or neither. Tables (``docs/FORMAT.md`` section 13; ``mm_`` before each name in
PostgreSQL)::

    files       (id, path UNIQUE, format, device, inode, size, mtime_ns, digest, version,
                 resume JSON, first_sync, last_sync)       -- one row per file path
    versions    (file_id, version, size, digest, first_sync, last_sync)
    chunks      (id, digest UNIQUE, size, data)             -- data = zlib(raw bytes)
    file_chunks (file_id, version, seq, offset, digest)     -- a version = its chunks in order
    sync_keys   (file_id, key, hash)                        -- keys later lines may name
    provisional (hash, file_id)                             -- the open tail of a file
    purged_versions (file_id, version, node, purged_at, reason)
                                                -- versions whose bytes dag forget deleted
    pruned      (hash, pruned_at, reason)                   -- nodes whose content was forgotten

A node is *provisional* while a later write to its file may still change it (the last
message of a session being written): the next sync of that file deletes it if it no longer
produces it and nothing else holds it (another file's provisional row, or any import that
made it permanent, which deletes every provisional row of that hash). A rewritten file (a
new version) deletes such a node only when it still produces the node's parent: otherwise
the rewrite changed the history before it and the node stays, as the old version's.

The SQL below is written once: ``{table}`` names a table (:meth:`Dialect.sql` adds the
PostgreSQL prefix) and ``?`` a parameter (``%s`` for psycopg); every statement is one both
databases run (``INSERT ... ON CONFLICT``, SQLite 3.24 or later). :class:`ArchiveStore` is
the interface of a store that archives (``dag sync``, ``dag restore``, ``dag sessions``,
``dag forget`` with purge): :class:`~merkle_memory.dag.store.SQLiteNodeStore` and
:class:`~merkle_memory.dag.store.PostgresNodeStore` give it their transactions
(:meth:`ArchiveStore._session`) and their schema upgrade; everything else is here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import zlib
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from .. import canonical
from ..errors import MerkleMemoryError, NodeNotFoundError, NodeStoreError
from ._node import Bucket, Node
from ._store_base import NodeStore

__all__ = [
    "ARCHIVE_SCHEMA",
    "NEW_FILE",
    "POSTGRES",
    "SQLITE",
    "ArchiveStore",
    "ArchivedFile",
    "Dialect",
    "FileState",
    "FileUpdate",
    "KeyLookup",
    "Session",
    "Sql",
    "chunk_digest",
    "py_path",
]

ARCHIVE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS files (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    format      TEXT,
    device      INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    resume      TEXT NOT NULL,
    first_sync  REAL NOT NULL,
    last_sync   REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    file_id     INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    first_sync  REAL NOT NULL,
    last_sync   REAL NOT NULL,
    PRIMARY KEY (file_id, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    id      INTEGER PRIMARY KEY,
    digest  TEXT NOT NULL UNIQUE,
    size    INTEGER NOT NULL,
    data    BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS file_chunks (
    file_id INTEGER NOT NULL,
    version INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    offset  INTEGER NOT NULL,
    digest  TEXT NOT NULL,
    PRIMARY KEY (file_id, version, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_keys (
    file_id INTEGER NOT NULL,
    key     TEXT NOT NULL,
    hash    TEXT,
    PRIMARY KEY (file_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS provisional (
    hash    TEXT NOT NULL,
    file_id INTEGER NOT NULL,
    PRIMARY KEY (hash, file_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS provisional_file ON provisional (file_id);
CREATE TABLE IF NOT EXISTS purged_versions (
    file_id   INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    node      TEXT NOT NULL,
    purged_at TEXT NOT NULL,
    reason    TEXT NOT NULL,
    PRIMARY KEY (file_id, version)
) WITHOUT ROWID;
"""
"""The SQLite archive tables (added by schema version 2)."""

_COMPRESSION: Final = 6
_PAGE: Final = 2000
_NODE_COLUMNS: Final = "hash, parent_hash, role, bucket, metadata"

NEW_FILE: Final = (0, 0, "")
""":attr:`FileUpdate.base` of a file the store did not know when the update was made."""


def _sqlite_path(path: str) -> str | bytes:
    """A path as SQLite keeps it: the text itself when it encodes as UTF-8, else its bytes
    (``os.fsencode``: a name that is not UTF-8 keeps every byte). A value that is not a
    ``str`` is given to SQLite as it is (which refuses what it cannot store)."""
    if not isinstance(path, str):
        return path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def _pg_path(path: str) -> str | bytes:
    """A path as PostgreSQL keeps it: its exact bytes (``os.fsencode``). A value that is not
    a ``str`` is given to the server as it is (which refuses what it cannot store)."""
    return os.fsencode(path) if isinstance(path, str) else path


def _pg_text(text: str) -> str | bytes:
    """Free text as PostgreSQL keeps it: UTF-8 bytes (a NUL, which ``text`` cannot hold,
    and a lone surrogate kept); not a ``str``: given to the server as it is."""
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def _sqlite_text(text: str) -> str | bytes:
    """Free text as SQLite keeps it: the text itself, or, when it holds a lone surrogate
    (which UTF-8 cannot encode), a BLOB of its bytes (``surrogatepass``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    except AttributeError:
        return text  # not a str: given to SQLite as it is
    return text


def py_path(value: object) -> str:
    """The path a ``path`` column holds (text, or bytes decoded by ``os.fsdecode``)."""
    if isinstance(value, bytes | memoryview):
        return os.fsdecode(bytes(value))
    return str(value)


def _py_text(value: object) -> str:
    """The free text a ``key`` or ``reason`` column holds (text, or UTF-8 bytes with any lone
    surrogate kept)."""
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("utf-8", "surrogatepass")
    return str(value)


_TABLE: Final = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells the archive's SQL and values.

    Attributes:
        name: ``"sqlite"`` or ``"postgresql"``.
        prefix: put before every table name (``"mm_"`` in PostgreSQL, where the store shares
            a database with ledgers).
        param: the parameter placeholder of the driver (``?`` or ``%s``).
        path: how a ``path`` column keeps a path.
        text: how a ``key`` or ``reason`` column keeps free text.
    """

    name: str
    prefix: str
    param: str
    path: Callable[[str], str | bytes]
    text: Callable[[str], str | bytes]

    def sql(self, statement: str) -> str:
        """``statement`` in this database's spelling: ``{table}`` becomes the table's name,
        ``?`` the placeholder (the archive's SQL has no ``?`` or ``%`` in a literal)."""
        named = _TABLE.sub(lambda m: self.prefix + m.group(1), statement)
        return named if self.param == "?" else named.replace("?", self.param)


SQLITE: Final = Dialect("sqlite", "", "?", _sqlite_path, _sqlite_text)
POSTGRES: Final = Dialect("postgresql", "mm_", "%s", _pg_path, _pg_text)


class Sql:
    """One connection (``sqlite3`` or psycopg) seen through the archive's SQL."""

    __slots__ = ("conn", "dialect")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def execute(self, statement: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement; the driver's cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        return self.conn.execute(self.dialect.sql(statement), tuple(args))

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run one statement for each row; how many rows it changed in all."""
        cursor = self.conn.cursor()
        try:
            cursor.executemany(self.dialect.sql(statement), rows)
            return max(int(cursor.rowcount), 0)
        finally:
            cursor.close()

    def has_table(self, table: str) -> bool:
        """Whether the table ``{table}`` exists (an older store may lack one)."""
        if self.dialect.name == "sqlite":
            found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            return self.execute(found, (table,)).fetchone() is not None
        row = self.execute("SELECT to_regclass(?)", (self.dialect.prefix + table,)).fetchone()
        return row[0] is not None


Session = Literal["read", "snapshot", "put", "write"]
"""What :meth:`ArchiveStore._session` opens: ``read`` one statement at a time; ``snapshot``
several reads that see one state; ``put`` a transaction that inserts nodes (importers may
run side by side); ``write`` a transaction that changes the archive, serialized against
every other ``put`` and ``write`` (SQLite's ``BEGIN IMMEDIATE``, a PostgreSQL advisory
lock)."""


def canonical_text(value: Any) -> str:
    """The RFC 8785 text of a JSON value (how the store keeps buckets and metadata)."""
    return canonical.dumps(value).decode("utf-8")


def chunk_digest(data: bytes) -> str:
    """The id of a chunk: SHA-256 of its raw (uncompressed) bytes, 64-char lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    t = datetime.now(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}Z"


@dataclass(frozen=True, slots=True)
class FileState:
    """What the store remembers of one synced file (a ``files`` row).

    Attributes:
        path: the file's absolute path, as synced.
        file_id: the row id.
        format: the transcript format name, or ``None`` (a file archived but not imported,
            such as a Cline task's ``ui_messages.json``).
        device, inode: ``st_dev`` and ``st_ino`` at the last sync.
        size: bytes consumed (archived) at the last sync.
        mtime_ns: ``st_mtime_ns`` at the last sync.
        digest: SHA-256 of the consumed bytes ``[0, size)``, 64-char lowercase hex.
        version: 1-based version of the file's archived bytes (a rewrite starts the next).
        resume: where the next sync continues (``cut``: byte offset of the first line it
            reads again; ``cut_line``: lines before it; ``attach``: the hash a chain
            continues from; ``context``: ``[line, offset, length]`` of a line read again for
            the importer's state; ``error``: why the last import failed; ``nodes``: nodes of
            the whole file; ``before``: nodes before ``cut``).
        first_sync, last_sync: epoch seconds of the first and the last sync.
    """

    path: str
    file_id: int
    format: str | None
    device: int
    inode: int
    size: int
    mtime_ns: int
    digest: str
    version: int
    resume: Mapping[str, Any]
    first_sync: float
    last_sync: float


@dataclass(frozen=True, slots=True)
class FileUpdate:
    """One file's sync, written in one transaction by :meth:`ArchiveStore.sync_files`.

    Attributes:
        path, format, device, inode, size, mtime_ns, digest: the new ``files`` row values
            (see :class:`FileState`).
        new_version: the consumed prefix changed: start the next version (its chunks from
            offset 0) and forget the keys of the old one.
        chunks: ``(byte offset, raw bytes)`` appended to the version, in order.
        nodes: the nodes of the part of the file read, parents first.
        provisional: hashes of ``nodes`` in the file's open tail.
        keys: keys of the part read -> hash (``None``: a root), for later parts.
        resume: the new resume state (see :class:`FileState`).
        when: epoch seconds of this sync.
        parsed: the file was imported: ``nodes`` are all it gives from its cut on, so its
            provisional nodes not among them are stale. ``False`` (only its stat changed, it
            is archived only, or its import failed) leaves its nodes as they are.
        base: the ``files`` row this update was computed from, as ``(version, size,
            digest)``, or :data:`NEW_FILE` for a file the store did not know; ``None``
            (the default) writes without checking. When the row has changed meanwhile
            (another sync committed the file first) the update is not written at all: its
            chunks would be appended twice, and the next sync reads the file again anyway.
    """

    path: str
    format: str | None
    device: int
    inode: int
    size: int
    mtime_ns: int
    digest: str
    new_version: bool
    chunks: tuple[tuple[int, bytes], ...] = ()
    nodes: tuple[Node, ...] = ()
    provisional: frozenset[str] = frozenset()
    keys: Mapping[str, str | None] = field(default_factory=dict)
    resume: Mapping[str, Any] = field(default_factory=dict)
    when: float = 0.0
    parsed: bool = True
    base: tuple[int, int, str] | None = None


@dataclass(frozen=True, slots=True)
class ArchivedFile:
    """One archived file, as ``dag sessions`` lists it.

    Attributes:
        path: the absolute path it was synced from.
        format: the transcript format, or ``None`` for a file archived only.
        size: bytes of its latest version.
        version: number of its latest version (1-based); ``versions`` how many are kept.
        nodes: nodes its latest import produced.
        digest: SHA-256 of the latest version, 64-char lowercase hex.
        first_sync, last_sync: epoch seconds.
        error: why its latest import failed, or ``None``.
    """

    path: str
    format: str | None
    size: int
    version: int
    versions: int
    nodes: int
    digest: str
    first_sync: float
    last_sync: float
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``dag sessions --json`` (times as epoch seconds)."""
        return {
            "path": self.path,
            "format": self.format,
            "size": self.size,
            "version": self.version,
            "versions": self.versions,
            "nodes": self.nodes,
            "digest": self.digest,
            "first_sync": self.first_sync,
            "last_sync": self.last_sync,
            "error": self.error,
        }


_STATE_COLUMNS: Final = (
    "path, id, format, device, inode, size, mtime_ns, digest, version, resume, "
    "first_sync, last_sync"
)


def _state(row: tuple[Any, ...]) -> FileState:
    try:
        resume = json.loads(row[9])
    except ValueError as exc:
        raise NodeStoreError(f"archived file {row[0]!r}: resume state is not JSON") from exc
    path, file_id, fmt, device, inode, size, mtime_ns, digest, version = row[:9]
    return FileState(
        py_path(path),
        int(file_id),
        fmt,
        int(device),
        int(inode),
        int(size),
        int(mtime_ns),
        str(digest),
        int(version),
        resume if isinstance(resume, dict) else {},
        float(row[10]),
        float(row[11]),
    )


def _load_states(db: Sql) -> dict[str, FileState]:
    """Every ``files`` row by path (one query: a sync of an unchanged tree only stats)."""
    rows = db.execute(f"SELECT {_STATE_COLUMNS} FROM {{files}}").fetchall()
    return {state.path: state for state in map(_state, rows)}


class KeyLookup(Mapping[str, "str | None"]):
    """The keys a file's earlier parts resolved (``sync_keys``), looked up one at a time (an
    appended part names few of them)."""

    def __init__(self, store: ArchiveStore, file_id: int) -> None:
        self._store = store
        self._file_id = file_id

    def _rows(self, statement: str, key: str | None = None) -> list[tuple[Any, ...]]:
        with self._store._session("read") as db:
            args = (self._file_id,) if key is None else (self._file_id, db.dialect.text(key))
            return list(db.execute(statement, args).fetchall())

    def _row(self, key: object) -> tuple[Any, ...] | None:
        if not isinstance(key, str):
            return None
        found = self._rows("SELECT hash FROM {sync_keys} WHERE file_id = ? AND key = ?", key)
        return found[0] if found else None

    def __getitem__(self, key: str) -> str | None:
        row = self._row(key)
        if row is None:
            raise KeyError(key)
        return str(row[0]) if row[0] else None

    def __contains__(self, key: object) -> bool:
        return self._row(key) is not None

    def __iter__(self) -> Iterator[str]:
        statement = "SELECT key FROM {sync_keys} WHERE file_id = ?"
        return iter(sorted(_py_text(row[0]) for row in self._rows(statement)))

    def __len__(self) -> int:
        return int(self._rows("SELECT count(*) FROM {sync_keys} WHERE file_id = ?")[0][0])


def _write_update(
    db: Sql,
    update: FileUpdate,
    insert_node: Callable[[Node], bool],
    encode: Callable[[Node], tuple[Any, ...]],
) -> int | None:
    """Write ``update`` (inside the caller's transaction); return how many nodes were new,
    or ``None`` when it was not written because its file's row is no longer the one it was
    computed from (:attr:`FileUpdate.base`).

    ``insert_node(node) -> bool`` inserts one node (``ON CONFLICT DO NOTHING``) and says
    whether it was new; ``encode(node)`` gives its row ``(hash, parent, role, bucket JSON,
    metadata JSON)``. Stale provisional nodes are deleted as :func:`_write_nodes` says (a new
    version deletes only those whose history it continues).
    """
    stored_path = db.dialect.path(update.path)
    row = db.execute(
        "SELECT id, version, size, digest FROM {files} WHERE path = ?", (stored_path,)
    ).fetchone()
    if update.base is not None:
        now = NEW_FILE if row is None else (int(row[1]), int(row[2]), str(row[3]))
        if now != update.base:
            return None  # another sync committed this file first
    resume = json.dumps(dict(update.resume), sort_keys=True, separators=(",", ":"))
    if row is None:
        db.execute(
            "INSERT INTO {files} (path, format, device, inode, size, mtime_ns, digest, version, "
            "resume, first_sync, last_sync) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
            (
                stored_path,
                update.format,
                update.device,
                update.inode,
                update.size,
                update.mtime_ns,
                update.digest,
                resume,
                update.when,
                update.when,
            ),
        )
        found = db.execute("SELECT id FROM {files} WHERE path = ?", (stored_path,)).fetchone()
        file_id, version, fresh = int(found[0]), 1, True
    else:
        file_id, version = int(row[0]), int(row[1])
        fresh = update.new_version or _purged(db, file_id, version) is not None
        if fresh:  # a rewrite, or bytes again after dag forget purged the version
            version += 1
            db.execute("DELETE FROM {sync_keys} WHERE file_id = ?", (file_id,))
        db.execute(
            "UPDATE {files} SET format = ?, device = ?, inode = ?, size = ?, mtime_ns = ?, "
            "digest = ?, version = ?, resume = ?, last_sync = ? WHERE id = ?",
            (
                update.format,
                update.device,
                update.inode,
                update.size,
                update.mtime_ns,
                update.digest,
                version,
                resume,
                update.when,
                file_id,
            ),
        )
    if fresh:
        db.execute(
            "INSERT INTO {versions} VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (file_id, version) "
            "DO UPDATE SET size = excluded.size, digest = excluded.digest, "
            "first_sync = excluded.first_sync, last_sync = excluded.last_sync",
            (file_id, version, update.size, update.digest, update.when, update.when),
        )
    else:
        db.execute(
            "UPDATE {versions} SET size = ?, digest = ?, last_sync = ? "
            "WHERE file_id = ? AND version = ?",
            (update.size, update.digest, update.when, file_id, version),
        )
    _write_chunks(db, file_id, version, update.chunks)
    new = _write_nodes(db, file_id, update, insert_node, encode) if update.parsed else 0
    if update.keys:
        text = db.dialect.text
        db.executemany(
            "INSERT INTO {sync_keys} (file_id, key, hash) VALUES (?, ?, ?) "
            "ON CONFLICT (file_id, key) DO UPDATE SET hash = excluded.hash",
            [(file_id, text(key), value) for key, value in update.keys.items()],
        )
    return new


def _write_chunks(
    db: Sql, file_id: int, version: int, chunks: tuple[tuple[int, bytes], ...]
) -> None:
    if not chunks:
        return
    sql = "SELECT coalesce(max(seq), -1) FROM {file_chunks} WHERE file_id = ? AND version = ?"
    seq = int(db.execute(sql, (file_id, version)).fetchone()[0])
    for offset, data in chunks:
        digest = chunk_digest(data)
        db.execute(
            "INSERT INTO {chunks} (digest, size, data) VALUES (?, ?, ?) "
            "ON CONFLICT (digest) DO NOTHING",
            (digest, len(data), zlib.compress(data, _COMPRESSION)),
        )
        seq += 1
        db.execute(
            "INSERT INTO {file_chunks} VALUES (?, ?, ?, ?, ?)",
            (file_id, version, seq, offset, digest),
        )


def _complete(db: Sql, node: Node, encode: Callable[[Node], tuple[Any, ...]]) -> None:
    """Complete a provisional node read again: its metadata is the stored one updated with
    what this read found (a tail that grew adds notes, counts, ...; nothing is removed), and
    a model, provider or agent name the stored bucket lacks is taken (none of it is hashed)."""
    row = db.execute("SELECT bucket, metadata FROM {nodes} WHERE hash = ?", (node.hash,)).fetchone()
    if row is None:
        return
    try:
        old_bucket, old_meta = json.loads(row[0]), json.loads(row[1])
    except ValueError:
        return
    _hash, _parent, _role, bucket_text, meta_text = encode(node)
    new_bucket, new_meta = json.loads(bucket_text), json.loads(meta_text)
    if not isinstance(old_bucket, dict) or not isinstance(old_meta, dict):
        return
    merged_meta = {**old_meta, **new_meta}
    merged_bucket = {**old_bucket, **{k: v for k, v in new_bucket.items() if k not in old_bucket}}
    if merged_meta == old_meta and merged_bucket == old_bucket:
        return
    db.execute(
        "UPDATE {nodes} SET bucket = ?, metadata = ? WHERE hash = ?",
        (canonical_text(merged_bucket), canonical_text(merged_meta), node.hash),
    )


def _held(db: Sql, digest: str) -> bool:
    """Whether some file's open tail holds the node ``digest``."""
    sql = "SELECT 1 FROM {provisional} WHERE hash = ? LIMIT 1"
    return db.execute(sql, (digest,)).fetchone() is not None


def _write_nodes(
    db: Sql,
    file_id: int,
    update: FileUpdate,
    insert_node: Callable[[Node], bool],
    encode: Callable[[Node], tuple[Any, ...]],
) -> int:
    """Insert the nodes, keep the provisional rows of the open tail, delete the file's stale
    provisional nodes (module docstring).

    A stale node is one of the file's provisional nodes that this read no longer produced.
    After an append it is always deleted (unless held or grown from): the file continues the
    same history, so the node was a message still being written. After a rewrite (a new
    version) it is deleted only when its parent is among the nodes the new version produced
    (or it is a root): the new version continues its history and replaced it (a JSON
    session rewritten as it grows). When the new version does not produce its parent, the
    history before it was rewritten: the node is what the old version gave, and it stays
    (no longer provisional).
    """
    sql = "SELECT hash FROM {provisional} WHERE file_id = ?"
    before = {str(row[0]) for row in db.execute(sql, (file_id,)).fetchall()}
    produced: set[str] = set()
    new = 0
    for node in update.nodes:
        produced.add(node.hash)
        inserted = bool(insert_node(node))
        new += inserted
        if not inserted and node.hash in before:
            _complete(db, node, encode)
        if node.hash not in update.provisional:
            db.execute("DELETE FROM {provisional} WHERE hash = ?", (node.hash,))  # final now
            continue
        # Provisional for this file too if it is new, was already, or another file's open
        # tail holds it; a node already permanent stays permanent.
        shared = not inserted and node.hash not in before and _held(db, node.hash)
        if inserted or node.hash in before or shared:
            db.execute(
                "INSERT INTO {provisional} VALUES (?, ?) ON CONFLICT DO NOTHING",
                (node.hash, file_id),
            )
    stale = sorted(before - produced)
    if not stale:
        return new
    marks = ",".join("?" * len(stale))
    ordered = db.execute(
        f"SELECT hash, parent_hash FROM {{nodes}} WHERE hash IN ({marks}) ORDER BY seq DESC",
        tuple(stale),
    ).fetchall()
    db.execute(
        f"DELETE FROM {{provisional}} WHERE file_id = ? AND hash IN ({marks})", (file_id, *stale)
    )
    for digest, parent in ordered:  # children before parents
        if update.new_version and parent and parent not in produced:
            continue  # the rewrite changed the history before it: the old version's node
        if db.execute("SELECT 1 FROM {provisional} WHERE hash = ?", (digest,)).fetchone():
            continue  # another file's open tail holds it
        grown = "SELECT 1 FROM {nodes} WHERE parent_hash = ? LIMIT 1"
        if db.execute(grown, (digest,)).fetchone():
            continue  # something grew from it
        db.execute("DELETE FROM {nodes} WHERE hash = ?", (digest,))
    return new


def _archived_files(db: Sql) -> list[ArchivedFile]:
    """Every archived file, by the bytes of its path (``os.fsencode``)."""
    rows = db.execute(
        "SELECT f.path, f.format, f.size, f.version, "
        "(SELECT count(*) FROM {versions} AS v WHERE v.file_id = f.id), "
        "f.resume, f.digest, f.first_sync, f.last_sync FROM {files} AS f ORDER BY f.path"
    ).fetchall()
    out: list[ArchivedFile] = []
    for path, fmt, size, version, versions, resume, digest, first, last in rows:
        try:
            state = json.loads(resume)
        except ValueError:
            state = {}
        nodes = state.get("nodes", 0) if isinstance(state, dict) else 0
        error = state.get("error") if isinstance(state, dict) else None
        out.append(
            ArchivedFile(
                py_path(path),
                fmt,
                int(size),
                int(version),
                int(versions),
                int(nodes) if isinstance(nodes, int) else 0,
                str(digest),
                float(first),
                float(last),
                error if isinstance(error, str) else None,
            )
        )
    out.sort(key=lambda archived: os.fsencode(archived.path))  # one order in every database
    return out


def _read_version(db: Sql, path: str, version: int | None) -> Iterator[bytes]:
    """The bytes of one archived version of ``path`` (the latest for ``None``), chunk by
    chunk, each checked against its digest and the whole against the version's digest.

    Raises:
        NodeStoreError: no such file or version, or a chunk that is missing, does not
            decompress, or does not match its digest or the version's.
    """
    row = db.execute(
        "SELECT id, version FROM {files} WHERE path = ?", (db.dialect.path(path),)
    ).fetchone()
    if row is None:
        raise NodeStoreError(f"no archived file {path}")
    file_id, latest = int(row[0]), int(row[1])
    wanted = latest if version is None else version
    purged = _purged(db, file_id, wanted)
    if purged is not None:
        node, when, reason = purged
        why = f", reason: {reason}" if reason else ""
        raise NodeStoreError(
            f"version {wanted} of {path} was purged by dag forget of node {node} "
            f"at {when}{why}: its bytes are gone"
        )
    found = db.execute(
        "SELECT size, digest FROM {versions} WHERE file_id = ? AND version = ?", (file_id, wanted)
    ).fetchone()
    if found is None:
        raise NodeStoreError(f"no version {wanted} of {path} (versions 1 to {latest})")
    size, expected = int(found[0]), str(found[1])
    whole = hashlib.sha256()
    total = 0
    for offset, digest in db.execute(
        'SELECT "offset", digest FROM {file_chunks} WHERE file_id = ? AND version = ? ORDER BY seq',
        (file_id, wanted),
    ).fetchall():
        if offset != total:
            raise NodeStoreError(f"archive of {path}: chunk at offset {offset}, expected {total}")
        stored = db.execute("SELECT data FROM {chunks} WHERE digest = ?", (digest,)).fetchone()
        if stored is None:
            raise NodeStoreError(f"archive of {path}: chunk {digest} is missing")
        try:
            data = zlib.decompress(stored[0])
        except (zlib.error, TypeError) as exc:
            raise NodeStoreError(f"archive of {path}: chunk {digest} is corrupt: {exc}") from exc
        if chunk_digest(data) != digest:
            raise NodeStoreError(f"archive of {path}: chunk {digest} does not match its digest")
        whole.update(data)
        total += len(data)
        yield data
    if total != size or whole.hexdigest() != expected:
        raise NodeStoreError(
            f"archive of {path}: version {wanted} does not match its digest "
            f"({total} of {size} bytes)"
        )


_PURGED_TABLE: Final = """
CREATE TABLE IF NOT EXISTS purged_versions (
    file_id   INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    node      TEXT NOT NULL,
    purged_at TEXT NOT NULL,
    reason    TEXT NOT NULL,
    PRIMARY KEY (file_id, version)
) WITHOUT ROWID"""
"""Added to SQLite schema version 2 after its first release: created when missing."""
_EMPTY_DIGEST: Final = hashlib.sha256(b"").hexdigest()


def _purged(db: Sql, file_id: int, version: int) -> tuple[str, str, str] | None:
    """``(node, purged_at, reason)`` when the version's bytes were purged, else ``None``."""
    if not db.has_table("purged_versions"):
        return None
    row = db.execute(
        "SELECT node, purged_at, reason FROM {purged_versions} WHERE file_id = ? AND version = ?",
        (file_id, version),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), _py_text(row[2]))


def _archived_versions(db: Sql) -> list[tuple[str, str | None, int]]:
    """``(path, format, version)`` of every archived version whose bytes are kept (not
    purged), by the bytes of the path and by version."""
    where = (
        " WHERE NOT EXISTS (SELECT 1 FROM {purged_versions} AS p"
        " WHERE p.file_id = v.file_id AND p.version = v.version)"
        if db.has_table("purged_versions")
        else ""
    )
    rows = db.execute(
        "SELECT f.path, f.format, v.version FROM {versions} AS v JOIN {files} AS f "
        f"ON f.id = v.file_id{where} ORDER BY f.path, v.version"
    ).fetchall()
    found = [(py_path(path), fmt, int(version)) for path, fmt, version in rows]
    return sorted(found, key=lambda row: (os.fsencode(row[0]), row[2]))


def _purge_versions(
    db: Sql, targets: Sequence[tuple[str, int]], node: str, when: str, reason: str
) -> int:
    """Delete the bytes of archived versions (inside the caller's transaction): their chunk
    lists, and every chunk no other version uses; record each in ``purged_versions``
    (``dag restore`` of it then fails, naming the forget). When the latest version of a file
    is purged, the file's row forgets what was consumed (size 0, no keys, no provisional
    nodes, ``mtime_ns`` -1), so the next ``dag sync`` of the file, if it still exists,
    archives it whole as a new version. Returns how many versions were purged.

    Raises:
        NodeStoreError: no such archived file or version.
    """
    if not db.has_table("purged_versions"):
        db.execute(_PURGED_TABLE)
    count = 0
    for path, version in targets:
        row = db.execute(
            "SELECT id, version FROM {files} WHERE path = ?", (db.dialect.path(path),)
        ).fetchone()
        if row is None:
            raise NodeStoreError(f"no archived file {path}")
        file_id, latest = int(row[0]), int(row[1])
        known = "SELECT 1 FROM {versions} WHERE file_id = ? AND version = ?"
        if db.execute(known, (file_id, version)).fetchone() is None:
            raise NodeStoreError(f"no version {version} of {path} (versions 1 to {latest})")
        if _purged(db, file_id, version) is not None:
            continue
        digests = {
            str(r[0])
            for r in db.execute(
                "SELECT digest FROM {file_chunks} WHERE file_id = ? AND version = ?",
                (file_id, version),
            ).fetchall()
        }
        db.execute(
            "DELETE FROM {file_chunks} WHERE file_id = ? AND version = ?", (file_id, version)
        )
        for digest in sorted(digests):
            db.execute(
                "DELETE FROM {chunks} WHERE digest = ? AND NOT EXISTS "
                "(SELECT 1 FROM {file_chunks} WHERE digest = ?)",
                (digest, digest),
            )
        db.execute(
            "INSERT INTO {purged_versions} VALUES (?, ?, ?, ?, ?)",
            (file_id, version, node, when, db.dialect.text(reason)),
        )
        if version == latest:  # nothing consumed: the next sync reads it whole, anew
            db.execute(
                "UPDATE {files} SET size = 0, digest = ?, mtime_ns = -1, resume = '{}' "
                "WHERE id = ?",
                (_EMPTY_DIGEST, file_id),
            )
            db.execute("DELETE FROM {sync_keys} WHERE file_id = ?", (file_id,))
            db.execute("DELETE FROM {provisional} WHERE file_id = ?", (file_id,))
        count += 1
    return count


class ArchiveStore(NodeStore):
    """A node store in a database that also keeps the transcript archive of ``dag sync`` and
    the pruned markers of ``dag forget``: the interface of ``dag sync``, ``dag restore``,
    ``dag sessions`` and :func:`~merkle_memory.transcripts.forget_node`, written once here
    on top of what each database gives (:meth:`_session`, :meth:`_upgrade`,
    :meth:`_encode`).

    Attributes:
        schema_version: the store's schema version; below 2 (a store opened for reading as
            it is) there is no archive and no pruned node.
    """

    schema_version: int

    # -- what each database gives ----------------------------------------------------------

    @property
    @abstractmethod
    def location(self) -> str:
        """The file path or the URL (without its password), for messages."""

    @abstractmethod
    def _session(self, kind: Session) -> AbstractContextManager[Sql]:
        """A connection for ``kind`` of work (:data:`Session`); a transaction is committed
        when the block ends and rolled back when it raises. Driver errors leave it as
        ``NodeStoreError`` (``cannot read node store ...``, ``cannot write node store ...``)."""

    @abstractmethod
    def _upgrade(self, db: Sql) -> None:
        """Add the tables of the current schema a store of an older version lacks, and set
        its version (inside the caller's transaction; :meth:`forget` on a store opened for
        reading)."""

    @abstractmethod
    def _encode(self, node: Node) -> tuple[Any, ...]:
        """The ``nodes`` row of a node: ``(hash, parent, role, bucket JSON, metadata JSON)``.

        Raises:
            NodeStoreError: ``node`` is not a ``Node`` or cannot be serialized.
        """

    def owns(self, path: str) -> bool:
        """Whether the file at ``path`` (absolute) is one the store itself is made of
        (``dag sync`` never archives it); ``False`` for a store in a server."""
        return False

    # -- writing nodes ---------------------------------------------------------------------

    def put(self, node: Node) -> bool:
        """See :meth:`NodeStore.put` (one transaction)."""
        return self.put_many((node,)) == 1

    def put_many(self, nodes: Iterable[Node]) -> int:
        """See :meth:`NodeStore.put_many`: one transaction, committed only at the end (and,
        in PostgreSQL, flushed to the server's write-ahead log); ``nodes`` may be a
        generator, consumed inside the transaction, and an exception it raises rolls the
        whole call back. A node a ``dag sync`` holds as provisional is made permanent."""
        sql = (
            f"INSERT INTO {{nodes}} ({_NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (hash) DO NOTHING"
        )
        with self._session("put") as db:
            if self._has_provisional(db):
                nodes = self._settled(db, nodes)
            inserted = 0
            batch: list[tuple[Any, ...]] = []
            for node in nodes:
                batch.append(self._encode(node))
                if len(batch) >= _PAGE:
                    inserted += db.executemany(sql, batch)
                    batch = []
            if batch:
                inserted += db.executemany(sql, batch)
        return inserted

    def _has_provisional(self, db: Sql) -> bool:
        if self.schema_version < 2:
            return False
        return db.execute("SELECT 1 FROM {provisional} LIMIT 1").fetchone() is not None

    @staticmethod
    def _settled(db: Sql, nodes: Iterable[Node]) -> Iterator[Node]:
        """``nodes``, each made permanent as it passes (its provisional rows deleted): a node
        stored by ``put`` is never removed by a later sync."""
        for node in nodes:
            if isinstance(node, Node):
                db.execute("DELETE FROM {provisional} WHERE hash = ?", (node.hash,))
            yield node

    # -- the transcript archive (dag sync) --------------------------------------------------

    def _need_archive(self) -> None:
        if self.schema_version < 2:
            raise NodeStoreError(
                f"{self.location}: node store schema version {self.schema_version} has no "
                "archive (open it for writing, e.g. with dag sync, to upgrade it)"
            )

    def file_states(self) -> dict[str, FileState]:
        """What the store remembers of every synced file, by absolute path (one query).

        Raises:
            NodeStoreError: the store cannot be read. (A version 1 store read without
                upgrading has no archive: ``{}``.)
        """
        if self.schema_version < 2:
            return {}
        with self._session("read") as db:
            return _load_states(db)

    def sync_keys(self, state: FileState) -> KeyLookup:
        """The keys the synced parts of a file resolved (key -> hash), looked up lazily."""
        return KeyLookup(self, state.file_id)

    def sync_file(self, update: FileUpdate) -> int | None:
        """Write one file's sync (:meth:`sync_files` of one update); return its new nodes
        (``None``: not written, its row changed since ``update.base``)."""
        return self.sync_files((update,))[0]

    def sync_files(self, updates: Sequence[FileUpdate]) -> list[int | None]:
        """Write files' syncs in one transaction, serialized against every other write of
        the store: for each, in order, its archived chunks, its nodes (keeping the
        provisional rows of its open tail and deleting its stale provisional nodes), the
        keys later parts may name, and its ``files`` row. A crash keeps all of it or none
        of it.

        Returns:
            For each update, how many of its nodes were new to the store, or ``None`` for an
            update not written because another sync committed its file first (its ``files``
            row differs from :attr:`FileUpdate.base`).

        Raises:
            NodeStoreError: the store cannot be written, has no archive tables, or a node
                cannot be stored (nothing of this call is kept).
        """
        self._need_archive()
        sql = (
            f"INSERT INTO {{nodes}} ({_NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (hash) DO NOTHING"
        )
        with self._session("write") as db:

            def insert(node: Node) -> bool:
                return int(db.execute(sql, self._encode(node)).rowcount) == 1

            return [_write_update(db, u, insert, self._encode) for u in updates]

    def archived_files(self) -> list[ArchivedFile]:
        """Every archived file, by the bytes of its path (``[]`` for a version 1 store read
        as it is).

        Raises:
            NodeStoreError: the store cannot be read.
        """
        if self.schema_version < 2:
            return []
        with self._session("snapshot") as db:
            return _archived_files(db)

    def archived_versions(self) -> list[tuple[str, str | None, int]]:
        """``(path, format, 1-based version)`` of every archived version whose bytes are kept
        (not purged by :meth:`forget`), by path and version (``[]`` for a version 1 store).

        Raises:
            NodeStoreError: the store cannot be read.
        """
        if self.schema_version < 2:
            return []
        with self._session("snapshot") as db:
            return _archived_versions(db)

    def archived_bytes(self, path: str, version: int | None = None) -> Iterator[bytes]:
        """The bytes of an archived file (its latest version, or ``version``, 1-based), in
        chunks, each checked against its SHA-256 and the whole against the version's; all
        read from one state of the store.

        Raises:
            NodeStoreError: no such archived file or version, or archived bytes that are
                missing, corrupt or do not match their digests (raised when reached: write
                the chunks somewhere temporary and keep them only at the end).
        """
        self._need_archive()
        with self._session("snapshot") as db:
            yield from _read_version(db, path, version)

    # -- forgetting ------------------------------------------------------------------------

    def is_pruned(self, node_hash_hex: str) -> bool:
        """See :meth:`NodeStore.is_pruned`."""
        if self.schema_version < 2:
            return False
        with self._session("read") as db:
            found = db.execute("SELECT 1 FROM {pruned} WHERE hash = ?", (node_hash_hex,))
            return found.fetchone() is not None

    def forget(
        self,
        node_hash_hex: str,
        reason: str = "",
        *,
        purge: Sequence[tuple[str, int]] | None = None,
    ) -> bool:
        """See :meth:`NodeStore.forget`: one transaction, serialized against every other
        write of the store.

        A store that archives transcripts (``dag sync``) keeps the raw bytes the node was
        read from: ``purge`` names the archived versions to delete in the same transaction,
        as ``(path, 1-based version)`` (:func:`merkle_memory.transcripts.forget_node` finds
        the versions whose import gives the node and calls this). Their chunk lists and
        every chunk no other version uses are deleted and each version is recorded as
        purged (``archived_bytes`` of it then raises, naming the node, the time and the
        reason); a purged latest version makes the next sync of its file, if it still
        exists, archive it whole as a new version. ``purge=()`` keeps the archive as it is;
        ``None`` (the default) is refused on a store that archives files, so its forgotten
        text is never left there by mistake. The node's provisional rows are deleted (a
        pruned node is never deleted by a later sync).

        The row's bucket is rewritten without content (type, role, model, provider and agent
        name kept; metadata kept) and a ``pruned`` row added (the tables of the current
        schema are added here to a store of an older version). What becomes of the old
        bytes inside the database files is the database's: see each store's ``forget``.

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
                f"{self.location} archives transcripts (dag sync): say which archived "
                "versions to purge (transcripts.forget_node, or purge=() to keep them)"
            )
        targets = [(str(path), int(version)) for path, version in (purge or ())]
        with self._session("write") as db:
            done = self._forget_locked(db, node_hash_hex, reason)
            if targets:
                _purge_versions(db, targets, node_hash_hex, _now(), reason)
        return done

    def _forget_locked(self, db: Sql, node_hash_hex: str, reason: str) -> bool:
        """The body of :meth:`forget`, inside its transaction."""
        found = db.execute("SELECT bucket FROM {nodes} WHERE hash = ?", (node_hash_hex,)).fetchone()
        if found is None:
            raise NodeNotFoundError(f"no node {node_hash_hex} in {self.location}", node_hash_hex)
        if self.schema_version < 2:  # a version 1 store opened read-only: upgrade it here
            self._upgrade(db)
        db.execute("DELETE FROM {provisional} WHERE hash = ?", (node_hash_hex,))
        known = "SELECT 1 FROM {pruned} WHERE hash = ?"
        if db.execute(known, (node_hash_hex,)).fetchone() is not None:
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
        db.execute("UPDATE {nodes} SET bucket = ? WHERE hash = ?", (empty, node_hash_hex))
        db.execute(
            "INSERT INTO {pruned} (hash, pruned_at, reason) VALUES (?, ?, ?)",
            (node_hash_hex, _now(), db.dialect.text(reason)),
        )
        return True
