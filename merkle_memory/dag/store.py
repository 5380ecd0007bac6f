"""Node stores: where conversation DAG nodes live between imports (DESIGN section 3).

Three stores share one interface, :class:`NodeStore`:

* :class:`MemoryNodeStore`, a dict in this process;
* :class:`SQLiteNodeStore` (opened with :func:`open_store`), one
  SQLite file in WAL mode, every :meth:`NodeStore.put_many` one transaction, so a process killed
  mid-import leaves the store as it was before that import or after it, never in between;
* :class:`PostgresNodeStore` (:func:`open_store` given a ``postgresql://`` URL; the extra
  ``postgres``), the same promises in a PostgreSQL database shared by many machines.

The SQLite and PostgreSQL stores are also :class:`ArchiveStore`: they keep the transcript
archive of ``dag sync`` (:func:`~merkle_memory.transcripts.sync_paths`) and the pruned markers
of :meth:`NodeStore.forget`, written once for both databases.

Both follow tapes' storage helpers (``pkg/storage``; shared research ``tapes.md`` section 3):
``put`` is idempotent and says whether it inserted; ``ancestry`` walks node-first and *reports*
a missing parent or a cycle rather than failing or looping; ``load_dag(hash)`` gives the
ancestry root-first and then every descendant of ``hash`` (siblings off the path are left
out). Unlike tapes, :meth:`NodeStore.roots`, :meth:`NodeStore.leaves` and
:meth:`NodeStore.children` have a defined order: insertion order.

A store holds whatever was put in it; :func:`verify_store` recomputes every node hash from the
stored bucket, reads every row back as ``get`` does, and reports mismatches, unreadable rows,
dangling parents and cycles.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import _pg
from ..errors import NodeStoreError
from ._archive import ArchivedFile, ArchiveStore, FileState, FileUpdate
from ._memory_store import MemoryNodeStore
from ._postgres import PostgresNodeStore
from ._sqlite import SQLiteNodeStore
from ._store_base import Ancestry, NodeStore, StoredRow
from ._store_verify import Dangling, HashMismatch, StoreReport, Unreadable, verify_store

__all__ = [
    "Ancestry",
    "ArchiveStore",
    "ArchivedFile",
    "Dangling",
    "FileState",
    "FileUpdate",
    "HashMismatch",
    "MemoryNodeStore",
    "NodeStore",
    "PostgresNodeStore",
    "SQLiteNodeStore",
    "StoreReport",
    "StoredRow",
    "Unreadable",
    "open_store",
    "verify_store",
]


def open_store(path: str | Path | None, *, create: bool = True) -> NodeStore:
    """Open a node store: SQLite at ``path``, PostgreSQL at a URL, or in memory for ``None``.

    Args:
        path: the SQLite file; a ``postgresql://`` URL (libpq's URI form, no ``#fragment``,
            e.g. ``postgresql:///agents?host=/run/pg``; needs the extra ``postgres``); or
            ``None``.
        create: create the file or the tables (with their schema) when missing; when
            ``False`` a missing file, or a file or database without the node store schema,
            is an error and is never written to.

    Raises:
        NodeStoreError: ``path`` is neither a ``str``, an ``os.PathLike`` nor ``None`` (nothing
            is created), the file or schema is missing (``create=False``), it is not a node
            store this library can use, or the database cannot be reached (or its driver,
            psycopg, is not installed).
    """
    if path is None:
        return MemoryNodeStore()
    if _pg.is_url(path):
        return PostgresNodeStore(str(path), create=create)
    if not isinstance(path, str | os.PathLike):
        raise NodeStoreError(
            f"node store path must be a str, an os.PathLike or None, not {type(path).__name__}"
        )
    if not os.fspath(path):
        raise NodeStoreError("node store path is empty (give a file name, a URL or None)")
    return SQLiteNodeStore(path, create=create)
