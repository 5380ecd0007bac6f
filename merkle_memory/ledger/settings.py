"""Where a store records its testimony mode: ``testimony.json`` beside ``ledger.jsonl``.

A tenant (and a memory bank) seals testimony in one of the modes of
:data:`~merkle_memory.ledger.records.TESTIMONY_MODES`. The mode is decided once and kept in one
place, so that verify and every later save agree (docs/DECISIONS.md, "Testimony modes: one
place"):

- ``STORE/testimony.json``, when present, names it: the RFC 8785 bytes of
  ``{"schema": "merkle-memory/testimony/1", "testimony": MODE}`` and a newline, written
  atomically (temp file, fsync, rename, folder fsync) before the first record it governs;
- otherwise the ledger implies it: ``"mnemo"`` when its first entry line is in the anchor's
  form (mnemo-cortex's ``json.dumps(entry, ensure_ascii=False)``, which is never RFC 8785), so
  a tenant mnemo-cortex started keeps sealing what mnemo-cortex's verifier checks;
  ``"rfc8785"`` for any other ledger, an empty one or none. The first line of an append-only
  ledger never changes, so this answer never changes either.

A store written before this file existed, and every default store, has no ``testimony.json``:
nothing on disk changes for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from .. import canonical
from .._fsio import atomic_write, read_regular_file
from ..errors import CanonicalizationError, LedgerFormatError, StoreFileError, TenantError
from ._entry import as_path, parse_line
from ._folder import as_store
from .records import DEFAULT_TESTIMONY, TESTIMONY_MODES
from .storage import LedgerStore

__all__ = [
    "SETTINGS_NAME",
    "SETTINGS_SCHEMA",
    "choose_testimony_mode",
    "implied_testimony_mode",
    "ledger_testimony_mode",
    "read_testimony_mode",
    "settings_bytes",
    "write_testimony_mode",
]

SETTINGS_NAME: Final = "testimony.json"
"""The file, beside ``ledger.jsonl``, that records a store's testimony mode."""

SETTINGS_SCHEMA: Final = "merkle-memory/testimony/1"
"""The ``schema`` value of ``testimony.json``."""

_FIRST_READ: Final = 1024
_FIRST_LINE_LIMIT: Final = 1 << 16


def settings_bytes(mode: str) -> bytes:
    """The exact content of ``testimony.json`` for ``mode`` (RFC 8785 and a newline).

    Raises:
        LedgerFormatError: ``mode`` is not one of ``TESTIMONY_MODES``.
    """
    if type(mode) is not str or mode not in TESTIMONY_MODES:
        raise LedgerFormatError(
            f"testimony mode must be one of {', '.join(TESTIMONY_MODES)}, not {mode!r:.80}"
        )
    return canonical.dumps({"schema": SETTINGS_SCHEMA, "testimony": mode}) + b"\n"


def _refuse(path: str, reason: str) -> Exception:
    return StoreFileError(path, reason)


def read_testimony_mode(folder: str | os.PathLike[str]) -> str | None:
    """The mode recorded in ``folder/testimony.json``, or ``None`` when there is no such file.

    Raises:
        StoreFileError: the file is a symbolic link or not a regular file (never opened so
            as to follow or block).
        LedgerFormatError: the file is not the RFC 8785 object ``{"schema", "testimony"}``
            with this schema and a known mode (a hand edit; the store's mode is unknown, so
            nothing is read or written by its guess).
        OSError: it exists but cannot be read.
    """
    path = as_path(folder, "a store folder") / SETTINGS_NAME
    if not os.path.lexists(path):  # the usual case: no open, nothing to read
        return None
    data = read_regular_file(path, _refuse)
    if data is None:
        return None
    try:
        value: Any = canonical.loads(data.removesuffix(b"\n"))
    except CanonicalizationError as exc:
        raise LedgerFormatError(f"{path}: unparseable ({exc})") from None
    if (
        type(value) is not dict
        or value.keys() != {"schema", "testimony"}
        or value["schema"] != SETTINGS_SCHEMA
        or value["testimony"] not in TESTIMONY_MODES
    ):
        raise LedgerFormatError(
            f'{path}: not a testimony mode record ({{"schema": "{SETTINGS_SCHEMA}", '
            f'"testimony": one of {", ".join(TESTIMONY_MODES)}}})'
        )
    mode: str = value["testimony"]
    return mode


def write_testimony_mode(folder: str | os.PathLike[str], mode: str) -> Path:
    """Record ``mode`` in ``folder/testimony.json`` atomically and durably.

    Returns:
        The file's path.

    Raises:
        LedgerFormatError: ``mode`` is unknown.
        OSError: from the file system (the folder must exist).
    """
    path = as_path(folder, "a store folder") / SETTINGS_NAME
    atomic_write(path, settings_bytes(mode))
    return path


def ledger_testimony_mode(ledger: LedgerStore | str | os.PathLike[str]) -> str:
    """The mode a ledger implies when no ``testimony.json`` names one.

    Returns:
        ``"mnemo"`` when the first non-blank line parses as a JSON object and is not its own
        RFC 8785 form (the anchor writes ``{"seq": 1, "ts": ...}`` with spaces, keys in
        insertion order); ``"rfc8785"`` otherwise (no ledger, an empty one, a first line
        this library wrote, or one that does not parse). Reads the first KiB (more only
        while no line has ended there, at most 64 KiB), whatever the ledger's length.

    Raises:
        LedgerError: ``ledger`` is neither a store nor a path.
        OSError: the ledger exists but cannot be read.
    """
    return implied_testimony_mode(ledger)[0]


def implied_testimony_mode(ledger: LedgerStore | str | os.PathLike[str]) -> tuple[str, bool]:
    """``(ledger_testimony_mode(ledger), whether that answer is final)``: final once the
    ledger has a first line (it never changes in an append-only ledger), so a caller may keep
    it instead of reading it again.

    Raises:
        The errors of :func:`ledger_testimony_mode`.
    """
    store = as_store(ledger, "a ledger path")
    with store.reader() as file:
        if file is None:
            return DEFAULT_TESTIMONY, False
        size = min(file.size(), _FIRST_LINE_LIMIT)
        want = min(size, _FIRST_READ)
        head = file.read(0, want)
        # A line is a few hundred bytes: read on (doubling) only while no line has ended.
        while want < size and b"\n" not in head.lstrip():
            want = min(size, want * 2)
            head = file.read(0, want)
    for raw in head.split(b"\n"):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = parse_line(line)
        except LedgerFormatError:
            return DEFAULT_TESTIMONY, True  # no entry at all: nothing to follow
        try:
            own = canonical.dumps(obj)
        except CanonicalizationError:
            return "mnemo", True  # e.g. an integer beyond 2**53: never a line this library wrote
        return (DEFAULT_TESTIMONY if own == line else "mnemo"), True
    return DEFAULT_TESTIMONY, False


def choose_testimony_mode(
    recorded: str | None,
    wanted: str | None,
    implied: Callable[[], str],
    has_lines: Callable[[], bool],
    label: str,
) -> tuple[str, bool]:
    """The mode a write uses, and whether it must be recorded first (for a tenant in a
    folder or in a database alike: docs/DECISIONS.md, "Testimony modes: one place").

    Args:
        recorded: the mode the store records (``testimony.json``, a database tenant's row),
            or ``None``.
        wanted: the mode the caller asked for, or ``None`` (keep the store's).
        implied: the mode the ledger implies (:func:`implied_testimony_mode`), read only
            when needed.
        has_lines: whether the ledger holds any byte, read only when needed.
        label: the store, for the error.

    Returns:
        ``(mode, record)``: ``record`` when ``wanted`` is not recorded yet and must be
        before the first record it governs.

    Raises:
        TenantError: the store is salted and another mode was asked for, or ``salted`` was
            asked for a ledger that already holds entries (their plain digests cannot be
            unlinked).
    """
    if wanted is None or wanted == recorded:
        return (recorded, False) if recorded is not None else (implied(), False)
    if recorded == "salted":
        raise TenantError(
            f"the tenant seals salted testimony (its recorded mode); it cannot change to "
            f"{wanted!r} (its salted records would no longer verify)",
            label,
        )
    if wanted == "salted" and has_lines():
        raise TenantError(
            "the ledger already holds entries with plain digests, which salting cannot "
            "unlink from their content; a salted tenant starts empty: make a new tenant "
            "with --salted (testimony='salted') and save the records into it",
            label,
        )
    return wanted, True
