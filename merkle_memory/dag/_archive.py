"""Private: the transcript archive inside a SQLite node store (schema version 2).

``dag sync`` keeps, beside the nodes, every transcript file it read: the raw bytes (each
version of each file as a list of content-addressed, zlib-compressed chunks) and the sync
progress (what was consumed, where the next sync continues, the keys later lines may name).
A path is stored as UTF-8 text, or, when it is not valid UTF-8 (a file name's bytes that
Python holds as lone surrogates, ``os.fsdecode``), as a BLOB of its exact bytes
(``os.fsencode``): :func:`db_path` and :func:`py_path`.
All of it is written in the transaction that writes the file's nodes
(:meth:`SQLiteNodeStore.sync_file`), so a crash keeps a file's progress and its nodes
together or neither. Tables (``docs/FORMAT.md`` section 13)::

    files       (id, path UNIQUE, format, device, inode, size, mtime_ns, digest, version,
                 resume JSON, first_sync, last_sync)       -- one row per file path
    versions    (file_id, version, size, digest, first_sync, last_sync)
    chunks      (id, digest UNIQUE, size, data)             -- data = zlib(raw bytes)
    file_chunks (file_id, version, seq, offset, digest)     -- a version = its chunks in order
    sync_keys   (file_id, key, hash)                        -- keys later lines may name
    provisional (hash, file_id)                             -- the open tail of a file
    purged_versions (file_id, version, node, purged_at, reason)
                                                -- versions whose bytes dag forget deleted

A node is *provisional* while a later write to its file may still change it (the last
message of a session being written): the next sync of that file deletes it if it no longer
produces it and nothing else holds it (another file's provisional row, or any import that
made it permanent, which deletes every provisional row of that hash). A rewritten file (a
new version) deletes such a node only when it still produces the node's parent: otherwise
the rewrite changed the history before it and the node stays, as the old version's.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .. import canonical
from ..errors import NodeStoreError
from ._node import Node

__all__ = [
    "ARCHIVE_SCHEMA",
    "NEW_FILE",
    "ArchivedFile",
    "FileState",
    "FileUpdate",
    "KeyLookup",
    "archived_files",
    "archived_versions",
    "chunk_digest",
    "db_path",
    "load_states",
    "purge_versions",
    "py_path",
    "read_version",
    "write_update",
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
"""The archive tables (added by schema version 2)."""

_COMPRESSION: Final = 6

NEW_FILE: Final = (0, 0, "")
""":attr:`FileUpdate.base` of a file the store did not know when the update was made."""


def db_path(path: str) -> str | bytes:
    """How ``path`` is kept in a ``path`` column: the text itself when it encodes as UTF-8,
    else its bytes (``os.fsencode``: a name that is not UTF-8 keeps every byte). A value that
    is not a ``str`` is given to SQLite as it is (which refuses what it cannot store)."""
    if not isinstance(path, str):
        return path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def py_path(value: object) -> str:
    """The path a ``path`` column holds (text, or a BLOB decoded by ``os.fsdecode``)."""
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return str(value)


def canonical_text(value: Any) -> str:
    """The RFC 8785 text of a JSON value (how the store keeps buckets and metadata)."""
    return canonical.dumps(value).decode("utf-8")


def chunk_digest(data: bytes) -> str:
    """The id of a chunk: SHA-256 of its raw (uncompressed) bytes, 64-char lowercase hex."""
    return hashlib.sha256(data).hexdigest()


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
    """One file's sync, written in one transaction by :meth:`SQLiteNodeStore.sync_file`.

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


def load_states(db: sqlite3.Connection) -> dict[str, FileState]:
    """Every ``files`` row by path (one query: a sync of an unchanged tree only stats)."""
    rows = db.execute(f"SELECT {_STATE_COLUMNS} FROM files").fetchall()
    return {state.path: state for state in map(_state, rows)}


class KeyLookup(Mapping[str, "str | None"]):
    """The keys a file's earlier parts resolved (``sync_keys``), looked up one at a time (an
    appended part names few of them)."""

    def __init__(self, db: sqlite3.Connection, file_id: int) -> None:
        self._db = db
        self._file_id = file_id

    def _row(self, key: object) -> tuple[Any, ...] | None:
        if not isinstance(key, str):
            return None
        sql = "SELECT hash FROM sync_keys WHERE file_id = ? AND key = ?"
        row: tuple[Any, ...] | None = self._db.execute(sql, (self._file_id, key)).fetchone()
        return row

    def __getitem__(self, key: str) -> str | None:
        row = self._row(key)
        if row is None:
            raise KeyError(key)
        return str(row[0]) if row[0] else None

    def __contains__(self, key: object) -> bool:
        return self._row(key) is not None

    def __iter__(self) -> Iterator[str]:
        sql = "SELECT key FROM sync_keys WHERE file_id = ? ORDER BY key"
        return (str(row[0]) for row in self._db.execute(sql, (self._file_id,)).fetchall())

    def __len__(self) -> int:
        sql = "SELECT count(*) FROM sync_keys WHERE file_id = ?"
        return int(self._db.execute(sql, (self._file_id,)).fetchone()[0])


def write_update(
    db: sqlite3.Connection,
    update: FileUpdate,
    insert_node: Any,
    encode: Any,
) -> int | None:
    """Write ``update`` (inside the caller's transaction); return how many nodes were new,
    or ``None`` when it was not written because its file's row is no longer the one it was
    computed from (:attr:`FileUpdate.base`).

    ``insert_node(node) -> bool`` inserts one node (``INSERT OR IGNORE``) and says whether it
    was new; ``encode(node)`` gives its row ``(hash, parent, role, bucket JSON, metadata
    JSON)``. Stale provisional nodes are deleted as :func:`_write_nodes` says (a new version
    deletes only those whose history it continues).
    """
    stored_path = db_path(update.path)
    row = db.execute(
        "SELECT id, version, size, digest FROM files WHERE path = ?", (stored_path,)
    ).fetchone()
    if update.base is not None:
        now = NEW_FILE if row is None else (int(row[1]), int(row[2]), str(row[3]))
        if now != update.base:
            return None  # another sync committed this file first
    resume = json.dumps(dict(update.resume), sort_keys=True, separators=(",", ":"))
    if row is None:
        cursor = db.execute(
            "INSERT INTO files (path, format, device, inode, size, mtime_ns, digest, version, "
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
        file_id, version, fresh = int(cursor.lastrowid or 0), 1, True
    else:
        file_id, version = int(row[0]), int(row[1])
        fresh = update.new_version or _purged(db, file_id, version) is not None
        if fresh:  # a rewrite, or bytes again after dag forget purged the version
            version += 1
            db.execute("DELETE FROM sync_keys WHERE file_id = ?", (file_id,))
        db.execute(
            "UPDATE files SET format = ?, device = ?, inode = ?, size = ?, mtime_ns = ?, "
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
            "INSERT OR REPLACE INTO versions VALUES (?, ?, ?, ?, ?, ?)",
            (file_id, version, update.size, update.digest, update.when, update.when),
        )
    else:
        db.execute(
            "UPDATE versions SET size = ?, digest = ?, last_sync = ? "
            "WHERE file_id = ? AND version = ?",
            (update.size, update.digest, update.when, file_id, version),
        )
    _write_chunks(db, file_id, version, update.chunks)
    new = _write_nodes(db, file_id, update, insert_node, encode) if update.parsed else 0
    if update.keys:
        db.executemany(
            "INSERT OR REPLACE INTO sync_keys (file_id, key, hash) VALUES (?, ?, ?)",
            ((file_id, key, value) for key, value in update.keys.items()),
        )
    return new


def _write_chunks(
    db: sqlite3.Connection, file_id: int, version: int, chunks: tuple[tuple[int, bytes], ...]
) -> None:
    if not chunks:
        return
    sql = "SELECT coalesce(max(seq), -1) FROM file_chunks WHERE file_id = ? AND version = ?"
    seq = int(db.execute(sql, (file_id, version)).fetchone()[0])
    for offset, data in chunks:
        digest = chunk_digest(data)
        db.execute(
            "INSERT OR IGNORE INTO chunks (digest, size, data) VALUES (?, ?, ?)",
            (digest, len(data), zlib.compress(data, _COMPRESSION)),
        )
        seq += 1
        db.execute(
            "INSERT INTO file_chunks VALUES (?, ?, ?, ?, ?)",
            (file_id, version, seq, offset, digest),
        )


def _complete(db: sqlite3.Connection, node: Node, encode: Any) -> None:
    """Complete a provisional node read again: its metadata is the stored one updated with
    what this read found (a tail that grew adds notes, counts, ...; nothing is removed), and
    a model, provider or agent name the stored bucket lacks is taken (none of it is hashed)."""
    row = db.execute("SELECT bucket, metadata FROM nodes WHERE hash = ?", (node.hash,)).fetchone()
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
        "UPDATE nodes SET bucket = ?, metadata = ? WHERE hash = ?",
        (canonical_text(merged_bucket), canonical_text(merged_meta), node.hash),
    )


def _held(db: sqlite3.Connection, digest: str) -> bool:
    """Whether some file's open tail holds the node ``digest``."""
    sql = "SELECT 1 FROM provisional WHERE hash = ? LIMIT 1"
    return db.execute(sql, (digest,)).fetchone() is not None


def _write_nodes(
    db: sqlite3.Connection, file_id: int, update: FileUpdate, insert_node: Any, encode: Any
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
    sql = "SELECT hash FROM provisional WHERE file_id = ?"
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
            db.execute("DELETE FROM provisional WHERE hash = ?", (node.hash,))  # final now
            continue
        # Provisional for this file too if it is new, was already, or another file's open
        # tail holds it; a node already permanent stays permanent.
        shared = not inserted and node.hash not in before and _held(db, node.hash)
        if inserted or node.hash in before or shared:
            db.execute("INSERT OR IGNORE INTO provisional VALUES (?, ?)", (node.hash, file_id))
    stale = before - produced
    if not stale:
        return new
    marks = ",".join("?" * len(stale))
    ordered = db.execute(
        f"SELECT hash, parent_hash FROM nodes WHERE hash IN ({marks}) ORDER BY seq DESC",
        tuple(stale),
    ).fetchall()
    db.execute(
        f"DELETE FROM provisional WHERE file_id = ? AND hash IN ({marks})", (file_id, *stale)
    )
    for digest, parent in ordered:  # children before parents
        if update.new_version and parent and parent not in produced:
            continue  # the rewrite changed the history before it: the old version's node
        if db.execute("SELECT 1 FROM provisional WHERE hash = ?", (digest,)).fetchone():
            continue  # another file's open tail holds it
        if db.execute("SELECT 1 FROM nodes WHERE parent_hash = ? LIMIT 1", (digest,)).fetchone():
            continue  # something grew from it
        db.execute("DELETE FROM nodes WHERE hash = ?", (digest,))
    return new


def archived_files(db: sqlite3.Connection) -> list[ArchivedFile]:
    """Every archived file, by path."""
    rows = db.execute(
        "SELECT f.path, f.format, f.size, f.version, "
        "(SELECT count(*) FROM versions AS v WHERE v.file_id = f.id), "
        "f.resume, f.digest, f.first_sync, f.last_sync FROM files AS f ORDER BY f.path"
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
    return out


def read_version(db: sqlite3.Connection, path: str, version: int | None) -> Iterator[bytes]:
    """The bytes of one archived version of ``path`` (the latest for ``None``), chunk by
    chunk, each checked against its digest and the whole against the version's digest.

    Raises:
        NodeStoreError: no such file or version, or a chunk that is missing, does not
            decompress, or does not match its digest or the version's.
    """
    row = db.execute("SELECT id, version FROM files WHERE path = ?", (db_path(path),)).fetchone()
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
        "SELECT size, digest FROM versions WHERE file_id = ? AND version = ?", (file_id, wanted)
    ).fetchone()
    if found is None:
        raise NodeStoreError(f"no version {wanted} of {path} (versions 1 to {latest})")
    size, expected = int(found[0]), str(found[1])
    whole = hashlib.sha256()
    total = 0
    for offset, digest in db.execute(
        "SELECT offset, digest FROM file_chunks WHERE file_id = ? AND version = ? ORDER BY seq",
        (file_id, wanted),
    ).fetchall():
        if offset != total:
            raise NodeStoreError(f"archive of {path}: chunk at offset {offset}, expected {total}")
        stored = db.execute("SELECT data FROM chunks WHERE digest = ?", (digest,)).fetchone()
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
_EMPTY_DIGEST: Final = hashlib.sha256(b"").hexdigest()


def _has_purged_table(db: sqlite3.Connection) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'purged_versions'"
    return db.execute(sql).fetchone() is not None


def _purged(db: sqlite3.Connection, file_id: int, version: int) -> tuple[str, str, str] | None:
    """``(node, purged_at, reason)`` when the version's bytes were purged, else ``None``."""
    if not _has_purged_table(db):
        return None
    row = db.execute(
        "SELECT node, purged_at, reason FROM purged_versions WHERE file_id = ? AND version = ?",
        (file_id, version),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), str(row[2]))


def archived_versions(db: sqlite3.Connection) -> list[tuple[str, str | None, int]]:
    """``(path, format, version)`` of every archived version whose bytes are kept (not
    purged), by path and version."""
    purged = _has_purged_table(db)
    where = (
        " WHERE NOT EXISTS (SELECT 1 FROM purged_versions AS p"
        " WHERE p.file_id = v.file_id AND p.version = v.version)"
        if purged
        else ""
    )
    rows = db.execute(
        "SELECT f.path, f.format, v.version FROM versions AS v JOIN files AS f "
        f"ON f.id = v.file_id{where} ORDER BY f.path, v.version"
    ).fetchall()
    return [(py_path(path), fmt, int(version)) for path, fmt, version in rows]


def purge_versions(
    db: sqlite3.Connection,
    targets: Iterator[tuple[str, int]] | list[tuple[str, int]] | tuple[tuple[str, int], ...],
    node: str,
    when: str,
    reason: str,
) -> int:
    """Delete the bytes of archived versions (inside the caller's transaction, with
    ``secure_delete`` on): their chunk lists, and every chunk no other version uses; record
    each in ``purged_versions`` (``dag restore`` of it then fails, naming the forget). When
    the latest version of a file is purged, the file's row forgets what was consumed (size
    0, no keys, no provisional nodes, ``mtime_ns`` -1), so the next ``dag sync`` of the file,
    if it still exists, archives it whole as a new version. Returns how many versions were
    purged.

    Raises:
        NodeStoreError: no such archived file or version.
    """
    db.execute(_PURGED_TABLE)
    count = 0
    for path, version in targets:
        row = db.execute(
            "SELECT id, version FROM files WHERE path = ?", (db_path(path),)
        ).fetchone()
        if row is None:
            raise NodeStoreError(f"no archived file {path}")
        file_id, latest = int(row[0]), int(row[1])
        known = "SELECT 1 FROM versions WHERE file_id = ? AND version = ?"
        if db.execute(known, (file_id, version)).fetchone() is None:
            raise NodeStoreError(f"no version {version} of {path} (versions 1 to {latest})")
        if _purged(db, file_id, version) is not None:
            continue
        digests = {
            str(r[0])
            for r in db.execute(
                "SELECT digest FROM file_chunks WHERE file_id = ? AND version = ?",
                (file_id, version),
            ).fetchall()
        }
        db.execute("DELETE FROM file_chunks WHERE file_id = ? AND version = ?", (file_id, version))
        for digest in sorted(digests):
            db.execute(
                "DELETE FROM chunks WHERE digest = ? AND NOT EXISTS "
                "(SELECT 1 FROM file_chunks WHERE digest = ?)",
                (digest, digest),
            )
        db.execute(
            "INSERT INTO purged_versions VALUES (?, ?, ?, ?, ?)",
            (file_id, version, node, when, reason),
        )
        if version == latest:  # nothing consumed: the next sync reads it whole, anew
            db.execute(
                "UPDATE files SET size = 0, digest = ?, mtime_ns = -1, resume = '{}' WHERE id = ?",
                (_EMPTY_DIGEST, file_id),
            )
            db.execute("DELETE FROM sync_keys WHERE file_id = ?", (file_id,))
            db.execute("DELETE FROM provisional WHERE file_id = ?", (file_id,))
        count += 1
    return count
