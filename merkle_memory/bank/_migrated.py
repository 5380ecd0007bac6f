"""The migration index of a bank: legacy id -> new id, kept across runs (private).

``BANK/memories/.migrated.json`` holds the RFC 8785 bytes of
``{"ids": {"<legacy id>": "<new id>", ...}, "schema": "migrated/1"}`` (new ids 64-char
lowercase hex). ``MemoryBank.migrate`` reads it to rewrite a link ``mm://memory/<legacy id>``
naming a memory migrated by an earlier run, and rewrites it (atomically, mode 0o644) with the
ids of each run's new files before any legacy file is removed. It is not a memory: the
file scans of ``verify`` and ``list`` skip it, and report it only when it does not parse as
this format. Memory files never hold the legacy id (they hold only hashed fields).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .. import canonical
from .._fsio import atomic_write
from ..errors import BankError, CanonicalizationError
from . import _files as _bankfs
from .memory import is_memory_id

if TYPE_CHECKING:
    from ._bank import MemoryBank

__all__ = ["INDEX_NAME", "INDEX_SCHEMA", "check_index", "read_index", "write_index"]

INDEX_NAME: Final = ".migrated.json"
"""File name of the migration index, inside ``memories/``."""

INDEX_SCHEMA: Final = "migrated/1"
"""Value of the index's ``schema`` field."""


def _parse(data: bytes) -> dict[str, str]:
    """The ``{legacy id: new id}`` map of an index file's bytes; BankError when malformed."""
    try:
        obj = canonical.loads(data)
    except CanonicalizationError as exc:
        raise BankError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict) or set(obj) != {"ids", "schema"}:
        raise BankError('not a migration index (expected the keys "ids" and "schema")')
    if obj["schema"] != INDEX_SCHEMA:
        raise BankError(f"unknown schema {str(obj['schema'])[:40]!r} (expected {INDEX_SCHEMA})")
    ids = obj["ids"]
    if not isinstance(ids, Mapping):
        raise BankError('"ids" must be an object')
    for legacy_id, new_id in ids.items():
        if not legacy_id or not is_memory_id(new_id):
            raise BankError(f"bad entry {legacy_id[:40]!r}: {str(new_id)[:80]!r}")
    return dict(ids)


def _path(bank: MemoryBank) -> Path:
    return bank.active_dir / INDEX_NAME


def check_index(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``None`` when the index at ``path`` is well formed, else ``(kind, reason)`` for
    ``verify`` (kinds of :mod:`merkle_memory._bankfs`)."""
    try:
        _parse(_bankfs.read_regular(path))
    except _bankfs.NotRegularError as exc:
        return _bankfs.UNEXPECTED_FILE, f"migration index: {exc}"
    except FileNotFoundError:
        return None
    except (BankError, OSError) as exc:
        return _bankfs.UNPARSEABLE, f"migration index: {exc}"
    return None


def read_index(bank: MemoryBank) -> dict[str, str]:
    """The bank's ``{legacy id: new id}`` map (empty when there is no index).

    Raises:
        BankError: the index exists but is a symlink, a special file or malformed (the
            migration must not go on and overwrite it).
    """
    path = _path(bank)
    if not os.path.lexists(path):
        return {}
    try:
        return _parse(_bankfs.read_regular(path))
    except (BankError, OSError) as exc:
        raise BankError(
            f"cannot read the migration index memories/{INDEX_NAME}: {exc}; restore it or "
            "remove it (links to memories migrated earlier then stay unresolved)"
        ) from exc


def write_index(bank: MemoryBank, ids: Mapping[str, str]) -> None:
    """Replace the index with ``ids`` (atomic and durable, mode 0o644).

    Raises:
        OSError: from the file system.
    """
    data = canonical.dumps({"ids": dict(ids), "schema": INDEX_SCHEMA})
    atomic_write(_path(bank), data, mode=0o644)
