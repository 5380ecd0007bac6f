"""Memory records: a tenant's ``memory/*.json`` files and their testimony (DESIGN section 4).

A record is one JSON object per file. Its *testimony* is ``digest({f: record.get(f) for f in
sealed_fields})`` (a missing field counts as ``null``); the default sealed fields are
mnemo-cortex's eight. Any other field is a filing field that may change without breaking the
seal. Record files are parsed with the stdlib ``json`` parser (the anchor's), but a duplicate
key or a ``NaN``/``Infinity`` literal anywhere makes the file unparseable.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from . import canonical
from ._fsio import atomic_write, makedirs_durable
from ._ledger_entry import anchor_digest
from .errors import CanonicalizationError, LedgerFormatError, RecordError

__all__ = [
    "DEFAULT_SEALED_FIELDS",
    "MAX_RECORD_ID_BYTES",
    "RecordState",
    "read_record",
    "record_path",
    "scan_records",
    "testimony",
    "testimony_forms",
    "validate_record_id",
    "write_record",
]

log = logging.getLogger("merkle_memory.ledger")

DEFAULT_SEALED_FIELDS: Final[tuple[str, ...]] = (
    "id",
    "session_id",
    "agent_id",
    "summary",
    "key_facts",
    "decisions_made",
    "projects_referenced",
    "timestamp",
)
"""The fields a record's testimony covers by default (mnemo-cortex's, in its order)."""

MAX_RECORD_ID_BYTES: Final = 200
"""Longest record id, in UTF-8 bytes (so that ``<id>.json`` fits any file system's name)."""


class _Unparseable(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _Unparseable(f"{name} literal")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Unparseable("duplicate key")
    return obj


_CONTROL: Final = re.compile("[\x00-\x1f\x7f]")
_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_no_duplicates)


def validate_record_id(record_id: Any) -> str:
    """Check that a record id can name a file inside ``memory/`` and nothing else.

    Args:
        record_id: the candidate id.

    Returns:
        ``record_id`` unchanged.

    Raises:
        RecordError: not a ``str``; empty; ``.`` or containing ``..``; a ``/`` or ``\\``; a NUL
            or other control character; a lone surrogate; longer than ``MAX_RECORD_ID_BYTES``
            UTF-8 bytes.
    """
    if type(record_id) is not str:
        raise RecordError(f"record id must be a string, not {type(record_id).__name__}")
    if not record_id or record_id == "." or ".." in record_id:
        raise RecordError(f"record id {record_id!r} is empty or contains '..'")
    if "/" in record_id or "\\" in record_id:
        raise RecordError(f"record id {record_id!r} contains a path separator")
    if _CONTROL.search(record_id) is not None:
        raise RecordError(f"record id {record_id!r} contains a NUL or control character")
    try:
        size = len(record_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise RecordError(f"record id {record_id!r} contains a lone surrogate") from None
    if size > MAX_RECORD_ID_BYTES:
        raise RecordError(f"record id is {size} bytes long, over {MAX_RECORD_ID_BYTES}")
    return record_id


def record_path(memory_dir: str | os.PathLike[str], record_id: str) -> Path:
    """``memory_dir / f"{record_id}.json"`` after ``validate_record_id``.

    Raises:
        RecordError: an invalid id.
    """
    return Path(memory_dir) / f"{validate_record_id(record_id)}.json"


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one record file strictly.

    Returns:
        The parsed JSON object.

    Raises:
        RecordError: not UTF-8, not JSON, not an object, a duplicate key, a NaN/Infinity
            literal, or nesting too deep.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        value = _DECODER.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, _Unparseable, RecursionError) as exc:
        raise RecordError(f"{path}: unparseable record ({exc})") from None
    if type(value) is not dict:
        raise RecordError(f"{path}: a record must be a JSON object")
    return value


def _sealed(record: Mapping[str, Any], sealed_fields: Sequence[str]) -> dict[str, Any]:
    return {field: record.get(field) for field in sealed_fields}


def testimony(
    record: Mapping[str, Any], sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS
) -> str:
    """The digest this library seals for a record (RFC 8785 form).

    Args:
        record: the parsed record.
        sealed_fields: the fields covered; a missing one counts as ``null``.

    Returns:
        64-char lowercase hex ``digest({f: record.get(f) for f in sealed_fields})``.

    Raises:
        RecordError: a sealed value outside the RFC 8785 domain (e.g. an integer beyond
            2**53); such a record is never sealed by this library.
    """
    try:
        return canonical.digest(_sealed(record, sealed_fields))
    except CanonicalizationError as exc:
        raise RecordError(f"record cannot be canonicalized, so it is not sealed: {exc}") from exc


def testimony_forms(
    record: Mapping[str, Any], sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS
) -> tuple[str, ...]:
    """Every digest an entry may carry for this record: RFC 8785 and the anchor's form.

    Returns:
        One or two distinct 64-char hex digests (RFC 8785 first; only the anchor form for a
        record outside the RFC 8785 domain); empty if neither form exists.
    """
    return _forms(_sealed(record, sealed_fields))[0]


def _forms(sealed: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """``(testimony forms, RFC 8785 digest or None when outside its domain)``."""
    try:
        rfc: str | None = canonical.digest(sealed)
    except CanonicalizationError:
        rfc = None
    try:
        anchor = anchor_digest(sealed)
    except LedgerFormatError:
        anchor = ""
    if rfc is None:
        return ((anchor,) if anchor else ()), None
    return ((rfc,) if anchor in ("", rfc) else (rfc, anchor)), rfc


@dataclass(frozen=True, slots=True)
class RecordState:
    """What verify and seal need to know about one record id on disk.

    Attributes:
        path: the (first, by name) file holding it.
        forms: acceptable testimony digests (``()`` when the file is unparseable, its id is
            invalid, or two files claim the id with different testimony: never matches).
        sealable: the RFC 8785 testimony to seal, or ``None`` when it cannot be sealed.
    """

    path: Path
    forms: tuple[str, ...]
    sealable: str | None


def scan_records(
    memory_dir: str | os.PathLike[str], sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS
) -> dict[str, RecordState]:
    """Read every ``memory_dir/*.json`` (not recursive, in name order).

    The key is the record's ``id``, or the file stem when the file is unparseable, has no id
    or an invalid one (such a record can never match an entry). Two files claiming one id
    with different testimony make that id match nothing.

    Returns:
        id -> ``RecordState``; empty when the folder does not exist.

    Raises:
        OSError: the folder exists but cannot be listed.
    """
    folder = Path(memory_dir)
    states: dict[str, RecordState] = {}
    try:
        with os.scandir(folder) as listing:
            names = sorted(e.name for e in listing if e.name.endswith(".json") and e.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return states
    for name in names:
        path = folder / name
        key, state = name[:-5] or name, RecordState(path, (), None)
        try:
            record = read_record(path)
            key = validate_record_id(record.get("id"))
        except (RecordError, OSError) as exc:
            log.debug("record %s cannot be matched: %s", path, exc)
        else:
            forms, sealable = _forms(_sealed(record, sealed_fields))
            state = RecordState(path, forms, sealable)
        earlier = states.get(key)
        if earlier is not None and earlier.forms != state.forms:
            log.warning("records %s and %s claim one id %r", earlier.path, path, key)
            state = RecordState(earlier.path, (), None)
        elif earlier is not None:
            state = earlier
        states[key] = state
    return states


def write_record(memory_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Write ``memory_dir/<id>.json`` atomically and durably (temp, fsync, rename, fsync).

    Args:
        memory_dir: the tenant's ``memory/`` folder (created if missing).
        record: a JSON object with a valid ``id``; written as indented UTF-8 JSON.

    Returns:
        The file's path.

    Raises:
        RecordError: an invalid id, or a value that is not JSON.
        OSError: from the file system.
    """
    path = record_path(memory_dir, validate_record_id(record.get("id")))
    try:
        text = json.dumps(dict(record), ensure_ascii=False, indent=2, allow_nan=False)
        data = (text + "\n").encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise RecordError(f"record cannot be written as JSON: {exc}") from None
    makedirs_durable(path.parent)
    atomic_write(path, data)
    return path
