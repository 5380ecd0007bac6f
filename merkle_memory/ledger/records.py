"""Memory records: a tenant's ``memory/*.json`` files and their testimony (DESIGN section 4).

A record is one JSON object per file. Its *testimony* is a digest of ``{f: record.get(f) for
f in sealed_fields}`` (a missing field counts as ``null``); the default sealed fields are
mnemo-cortex's eight. Any other field is a filing field that may change without breaking the
seal. Record files are parsed with the stdlib ``json`` parser (the anchor's), but a duplicate
key or a ``NaN``/``Infinity`` literal anywhere makes the file unparseable.

The digest a tenant seals depends on its *testimony mode* (``TESTIMONY_MODES``; recorded per
tenant, :mod:`merkle_memory.ledger.settings`; docs/FORMAT.md section 3):

- ``"rfc8785"`` (the default): SHA-256 of the RFC 8785 bytes of the sealed fields;
- ``"mnemo"``: mnemo-cortex's own formula, SHA-256 of ``json.dumps(sealed, sort_keys=True,
  separators=(",", ":"), ensure_ascii=False)`` of the record as read back from its file, so
  that mnemo-cortex's verifier agrees on every value (``1.0``, ``1e-07``, astral keys, integers
  beyond 2**53);
- ``"salted"``: ``SHA-256(salt || RFC 8785 bytes)`` with a random 32-byte salt kept only in
  the record file (``SALT_FIELD``, 64 hex), so that once the file is gone the ledger's digest
  cannot be linked to any guessed content.

Verify accepts the RFC 8785 and the anchor form in every mode; in ``"salted"`` mode a record
holding a salt is judged by its salted digest alone, and a record without one (written by
another tool) is never adopted (its plain digest would stay guessable; ``Tenant.save`` salts
it).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import canonical
from .._fsio import atomic_write, makedirs_durable
from .._json import HEX64, strict_decode
from .._progress import EVERY, ProgressCallback
from ..errors import CanonicalizationError, LedgerFormatError, RecordError
from ._entry import anchor_digest, as_path

__all__ = [
    "DEFAULT_SEALED_FIELDS",
    "DEFAULT_TESTIMONY",
    "MAX_RECORD_ID_BYTES",
    "PENDING_SUFFIX",
    "SALT_FIELD",
    "SYMLINK_REASON",
    "TESTIMONY_MODES",
    "RecordState",
    "check_sealed_fields",
    "check_testimony_mode",
    "mnemo_digest",
    "new_salt",
    "pending_path",
    "read_record",
    "record_bytes",
    "record_path",
    "record_to_seal",
    "salted_digest",
    "scan_one",
    "scan_pending",
    "scan_records",
    "testimony",
    "testimony_forms",
    "validate_record_id",
    "write_pending",
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

TESTIMONY_MODES: Final = ("rfc8785", "mnemo", "salted")
"""How a tenant's testimony is computed (see the module docstring)."""

DEFAULT_TESTIMONY: Final = "rfc8785"
"""The testimony mode of a new tenant whose ledger holds no entry of mnemo-cortex."""

SALT_FIELD: Final = "testimony_salt"
"""The record field holding a salted record's salt: 64 lowercase hex (32 random bytes). A
filing field in the other modes."""

MAX_RECORD_ID_BYTES: Final = 200
"""Longest record id, in UTF-8 bytes (so that ``<id>.json`` fits any file system's name)."""


PENDING_SUFFIX: Final = ".json.pending"
"""Suffix of a re-saved record's new version, ``memory/<id>.json.pending``, kept beside the
sealed ``<id>.json`` until the new version's ledger line is durable (``Tenant.save``)."""

SYMLINK_REASON: Final = "a symbolic link (never followed)"
"""Why a record file that is a symbolic link is never read (``RecordState.problem``)."""

_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CONTROL: Final = re.compile("[\x00-\x1f\x7f]")


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
        RecordError: an invalid id, or ``memory_dir`` not a path.
    """
    folder = as_path(memory_dir, "a memory folder", RecordError)
    return folder / f"{validate_record_id(record_id)}.json"


def _decode(data: bytes) -> dict[str, Any]:
    """Parse one record file's bytes strictly; ``RecordError`` (no path) when it cannot be."""
    try:
        value = strict_decode(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"unparseable record ({exc})") from None
    if type(value) is not dict:
        raise RecordError("a record must be a JSON object")
    return value


def _read_bytes(path: Path) -> bytes:
    """Read a regular file without following a symbolic link at its last component.

    Raises:
        RecordError: the file is a symbolic link or not a regular file (never read).
        OSError: it cannot be opened or read.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError(SYMLINK_REASON) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError("not a regular file (never read)")
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one record file strictly, never following a symbolic link.

    Returns:
        The parsed JSON object.

    Raises:
        RecordError: the file is a symbolic link or not a regular file (it is not read); not
            UTF-8, not JSON, not an object, a duplicate key, a NaN/Infinity literal, or nesting
            too deep; ``path`` not a path.
        OSError: the file cannot be read.
    """
    file = as_path(path, "a record path", RecordError)
    try:
        return _decode(_read_bytes(file))
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None


def _sealed(record: Mapping[str, Any], sealed_fields: Sequence[str]) -> dict[str, Any]:
    return {field: record.get(field) for field in sealed_fields}


def _mapping(record: Any) -> Mapping[str, Any]:
    """``record`` if it is a mapping with ``str`` keys, else ``RecordError``."""
    if not isinstance(record, Mapping):
        raise RecordError(
            f"a record must be a mapping (a JSON object), not {type(record).__name__}"
        )
    for key in record:
        if type(key) is not str:
            raise RecordError(f"record keys must be strings, not {type(key).__name__}")
    return record


def check_sealed_fields(sealed_fields: Any) -> tuple[str, ...]:
    """Return ``sealed_fields`` as a tuple after checking it is a sequence of field names.

    Raises:
        RecordError: a ``str`` (not a sequence of names), not iterable, or an item that is
            not a ``str``.
    """
    if isinstance(sealed_fields, str | bytes):
        raise RecordError("sealed_fields must be a sequence of field names, not one string")
    try:
        fields = tuple(sealed_fields)
    except TypeError:
        raise RecordError(
            f"sealed_fields must be a sequence of field names, not {type(sealed_fields).__name__}"
        ) from None
    for field in fields:
        if type(field) is not str:
            raise RecordError(f"a sealed field name must be a string, not {field!r}")
    return fields


def check_testimony_mode(mode: Any) -> str:
    """Return ``mode`` after checking it is one of ``TESTIMONY_MODES``.

    Raises:
        RecordError: anything else (named in the message).
    """
    if type(mode) is not str or mode not in TESTIMONY_MODES:
        raise RecordError(
            f"testimony mode must be one of {', '.join(TESTIMONY_MODES)}, not {mode!r:.80}"
        )
    return mode


def new_salt() -> str:
    """A fresh salt for a salted record: 32 bytes from ``secrets``, as 64 lowercase hex."""
    return secrets.token_hex(32)


def salted_digest(salt: str, sealed: Mapping[str, Any]) -> str:
    """``SHA-256(salt bytes || RFC 8785 bytes of sealed)`` as 64-char lowercase hex.

    Args:
        salt: 64-char lowercase hex (the 32 salt bytes).
        sealed: the sealed fields of a record (``{f: record.get(f) for f in sealed_fields}``).

    Raises:
        RecordError: ``salt`` is not 64-char lowercase hex, or ``sealed`` is outside the RFC
            8785 domain.
    """
    if type(salt) is not str or HEX64.fullmatch(salt) is None:
        raise RecordError(f"{SALT_FIELD} must be 64-char lowercase hex, not {salt!r:.80}")
    try:
        data = canonical.dumps(dict(sealed))
    except CanonicalizationError as exc:
        raise RecordError(f"record cannot be canonicalized, so it is not sealed: {exc}") from exc
    return hashlib.sha256(bytes.fromhex(salt) + data).hexdigest()


def mnemo_digest(sealed: Mapping[str, Any]) -> str:
    """mnemo-cortex's testimony formula: SHA-256 of ``json.dumps(sealed, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)`` encoded as UTF-8.

    Exactly the anchor's ``content_hash`` for a record read from a file (research/mnemo.md
    section 1), except that a value with no JSON form is refused instead of hashed as its
    ``str()`` (the anchor's ``default=str``).

    Raises:
        RecordError: a value with no JSON form, ``NaN`` or an infinity, keys that cannot be
            sorted, too deep, or a lone surrogate (no UTF-8 form).
    """
    try:
        text = json.dumps(
            sealed, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        data = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise RecordError(f"record has no mnemo-cortex testimony: {exc}") from None
    return hashlib.sha256(data).hexdigest()


def testimony(
    record: Mapping[str, Any],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    *,
    mode: str = DEFAULT_TESTIMONY,
) -> str:
    """The digest this library seals for a record in a testimony mode.

    Args:
        record: the parsed record.
        sealed_fields: the fields covered; a missing one counts as ``null``.
        mode: one of ``TESTIMONY_MODES``: ``"rfc8785"`` gives ``digest({f: record.get(f)
            for f in sealed_fields})``; ``"mnemo"`` gives :func:`mnemo_digest` of those
            fields; ``"salted"`` gives :func:`salted_digest` with the record's ``SALT_FIELD``
            when it holds one, else the RFC 8785 digest (an unsalted record is sealed as in
            the default mode).

    Returns:
        64-char lowercase hex.

    Raises:
        RecordError: a sealed value outside the mode's domain (RFC 8785: e.g. an integer
            beyond 2**53; mnemo: no JSON form), such a record is never sealed by this
            library; a malformed salt; ``record`` not a mapping with ``str`` keys;
            ``sealed_fields`` not a sequence of ``str``; an unknown ``mode``.
    """
    mode = check_testimony_mode(mode)
    mapping = _mapping(record)
    sealed = _sealed(mapping, check_sealed_fields(sealed_fields))
    if mode == "mnemo":
        return mnemo_digest(sealed)
    if mode == "salted" and SALT_FIELD in mapping:
        return salted_digest(mapping[SALT_FIELD], sealed)
    try:
        return canonical.digest(sealed)
    except CanonicalizationError as exc:
        raise RecordError(f"record cannot be canonicalized, so it is not sealed: {exc}") from exc


def _retiring_digest(record: Mapping[str, Any], sealed_fields: Sequence[str], mode: str) -> str:
    """The digest a tombstone retires for a record that was never sealed (64-char lowercase
    hex): its testimony in ``mode``, except that an unsalted record of a salted tenant gets a
    throwaway salt, never its plain digest, which would link the tombstone to guessable
    content (the salt is gone with the record).

    Raises:
        RecordError: as :func:`testimony`.
    """
    if mode == "salted" and SALT_FIELD not in record:
        return salted_digest(new_salt(), _sealed(record, sealed_fields))
    return testimony(record, sealed_fields, mode=mode)


def testimony_forms(
    record: Mapping[str, Any],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    *,
    mode: str = DEFAULT_TESTIMONY,
) -> tuple[str, ...]:
    """Every digest an entry may carry for this record in a testimony mode.

    Returns:
        RFC 8785 and the anchor's form (one or two distinct 64-char hex digests, RFC 8785
        first; only the anchor form for a record outside the RFC 8785 domain); in
        ``"salted"`` mode, for a record holding a salt, its salted digest alone. Empty when
        no form exists (or the salt is malformed).

    Raises:
        RecordError: ``record`` not a mapping with ``str`` keys, ``sealed_fields`` not a
            sequence of ``str``, or an unknown ``mode``.
    """
    mode = check_testimony_mode(mode)
    mapping = _mapping(record)
    sealed = _sealed(mapping, check_sealed_fields(sealed_fields))
    return _forms(sealed, mode, mapping.get(SALT_FIELD))[0]


def record_to_seal(
    record: Mapping[str, Any],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    *,
    mode: str = DEFAULT_TESTIMONY,
) -> tuple[dict[str, Any], str]:
    """The record as ``Tenant.save`` writes it, and the testimony it seals.

    ``"rfc8785"``: the record unchanged and its RFC 8785 testimony. ``"salted"``: the record
    with a fresh ``SALT_FIELD`` (any salt it held is replaced, so no two saves share a salt)
    and its salted digest. ``"mnemo"``: the record unchanged and :func:`mnemo_digest` of its
    sealed fields *as read back from the bytes written* (``write_record``'s form), which is
    what mnemo-cortex's verifier hashes.

    Raises:
        RecordError: as :func:`testimony`, or the record cannot be written as JSON.
    """
    mode = check_testimony_mode(mode)
    fields = check_sealed_fields(sealed_fields)
    out = dict(_mapping(record))
    if mode == "salted":
        out[SALT_FIELD] = new_salt()
        return out, salted_digest(out[SALT_FIELD], _sealed(out, fields))
    if mode == "mnemo":
        return out, mnemo_digest(_sealed(_decode(record_bytes(out)), fields))
    return out, testimony(out, fields)


def _forms(
    sealed: dict[str, Any], mode: str = DEFAULT_TESTIMONY, salt: Any = None
) -> tuple[tuple[str, ...], str | None, str | None]:
    """``(testimony forms, the digest to seal or None, why it cannot be sealed or None)``."""
    if mode == "salted" and salt is not None:
        try:
            digest = salted_digest(salt, sealed)
        except RecordError as exc:
            return (), None, str(exc)
        return (digest,), digest, None
    try:
        rfc: str | None = canonical.digest(sealed)
    except CanonicalizationError:
        rfc = None
    try:
        anchor = anchor_digest(sealed)
    except LedgerFormatError:
        anchor = ""
    if rfc is None:
        forms: tuple[str, ...] = (anchor,) if anchor else ()
    else:
        forms = (rfc,) if anchor in ("", rfc) else (rfc, anchor)
    if mode == "mnemo":
        try:
            return forms, mnemo_digest(sealed), None
        except RecordError as exc:
            return forms, None, str(exc)
    if mode == "salted" and rfc is not None:
        return forms, None, _UNSALTED
    return forms, rfc, None if rfc is not None else _OUTSIDE_RFC8785


@dataclass(frozen=True, slots=True)
class RecordState:
    """What verify and seal need to know about one record id on disk.

    Attributes:
        path: the (first, by name) file holding it.
        forms: acceptable testimony digests (``()`` when the file is a symbolic link, is
            unparseable, its id is invalid, or two files claim the id with different
            testimony: never matches).
        sealable: the RFC 8785 testimony to seal, or ``None`` when it cannot be sealed.
        problem: why it cannot be sealed (one line, no path), or ``None`` when it can.
    """

    path: Path
    forms: tuple[str, ...]
    sealable: str | None
    problem: str | None = None


_OUTSIDE_RFC8785: Final = "a sealed value outside RFC 8785"
_UNSALTED: Final = (
    f"no {SALT_FIELD} in a salted tenant: sealing its plain digest would let the content be "
    "guessed from the ledger once the file is gone; save it (merkle-memory ledger save) to "
    "salt and seal it"
)
_CONFLICT: Final = "two files claim this id with different testimony"


def scan_records(
    memory_dir: str | os.PathLike[str],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    *,
    ignored: list[tuple[str, Path]] | None = None,
    mode: str = DEFAULT_TESTIMONY,
    progress: ProgressCallback | None = None,
) -> dict[str, RecordState]:
    """Read every ``memory_dir/*.json`` (not recursive, in name order).

    The key is the record's ``id``, or the file stem when the file is a symbolic link (never
    followed nor read, ``SYMLINK_REASON``), is unparseable, has no id or an invalid one (such
    a record can never match an entry). When files claiming one id differ in testimony, the
    one named ``<id>.json`` (where ``write_record`` writes) speaks for it, whatever the
    listing order, and each other claimant that differs from it is ignored, with a warning
    (files that agree with it are not: they testify the same); if no claimant is named
    ``<id>.json``, the id matches nothing.

    Args:
        memory_dir: the ``memory/`` folder.
        sealed_fields: the fields each testimony covers.
        ignored: when given, ``(id, path)`` of each ignored claimant is appended to it, in
            name order of the ids' first files (``Tenant.verify`` reports them as
            ``ignored_claimants``).
        mode: the tenant's testimony mode (``TESTIMONY_MODES``): it decides the digest to
            seal and, in ``"salted"`` mode, what a record's ``SALT_FIELD`` means.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"records"``, in files read.

    Returns:
        id -> ``RecordState``; empty when the folder does not exist or is not a folder.

    Raises:
        RecordError: ``memory_dir`` itself is a symbolic link (never followed) or not a path,
            ``sealed_fields`` is not a sequence of ``str``, or ``mode`` is unknown.
        OSError: the folder exists but cannot be listed.
    """
    fields = check_sealed_fields(sealed_fields)
    scheme = check_testimony_mode(mode)
    folder = as_path(memory_dir, "a memory folder", RecordError)
    try:
        st_mode = os.lstat(folder).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return {}
    if stat.S_ISLNK(st_mode):
        raise RecordError(f"{folder} is {SYMLINK_REASON}")
    if not stat.S_ISDIR(st_mode):
        return {}
    with os.scandir(folder) as listing:
        names = sorted(
            e.name for e in listing if e.name.endswith(".json") and (e.is_symlink() or e.is_file())
        )
    claims: dict[str, list[RecordState]] = {}
    for done, name in enumerate(names, 1):
        key, state = _scan_one(folder / name, fields, scheme)
        claims.setdefault(key, []).append(state)
        if progress is not None and (done % EVERY == 0 or done == len(names)):
            progress("records", done, len(names))
    return {key: _speaker(key, claimants, ignored) for key, claimants in claims.items()}


def _speaker(
    key: str, claimants: list[RecordState], ignored: list[tuple[str, Path]] | None
) -> RecordState:
    """The state that speaks for ``key`` among the files claiming it (see ``scan_records``)."""
    first = claimants[0]
    if all(c.forms == first.forms for c in claimants[1:]):
        return first
    named = next((c for c in claimants if c.path.name == f"{key}.json"), None)
    if named is None:
        paths = " and ".join(str(c.path) for c in claimants)
        log.warning("records %s claim one id %r", paths, key)
        return RecordState(first.path, (), None, _CONFLICT)
    for claimant in claimants:
        if claimant.forms != named.forms:
            log.warning("record %s claims id %r of %s; ignored", claimant.path, key, named.path)
            if ignored is not None:
                ignored.append((key, claimant.path))
    return named


def scan_one(
    path: str | os.PathLike[str],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    mode: str = DEFAULT_TESTIMONY,
) -> tuple[str, RecordState]:
    """``(key, state)`` of one record file, read as :func:`scan_records` reads each: the key
    is the record's id (the name's stem when it cannot be read), the state its testimony
    forms, the digest to seal and why it cannot be sealed. Never follows a link.

    Raises:
        RecordError: ``sealed_fields`` is not a sequence of ``str``, or ``mode`` is unknown
            (an unreadable file is a state, never an error).
    """
    return _scan_one(
        as_path(path, "a record path", RecordError),
        check_sealed_fields(sealed_fields),
        check_testimony_mode(mode),
    )


def _scan_one(path: Path, fields: tuple[str, ...], mode: str) -> tuple[str, RecordState]:
    """``(key, state)`` of one listed file (never follows a link, never raises)."""
    try:
        data = _read_bytes(path)
    except (RecordError, OSError) as exc:
        return _unmatched(path, exc)
    return _scan_bytes(path, data, fields, mode)


def _scan_bytes(
    path: Path, data: bytes, fields: tuple[str, ...], mode: str
) -> tuple[str, RecordState]:
    """``(key, state)`` of the file ``path`` holding ``data`` (never raises)."""
    try:
        record = _decode(data)
        key = validate_record_id(record.get("id"))
    except RecordError as exc:
        return _unmatched(path, exc)
    forms, sealable, problem = _forms(_sealed(record, fields), mode, record.get(SALT_FIELD))
    return key, RecordState(path, forms, sealable, problem)


def _unmatched(path: Path, exc: RecordError | OSError) -> tuple[str, RecordState]:
    """``(the name's stem, a state matching nothing)`` of a file that cannot be read."""
    log.debug("record %s cannot be matched: %s", path, exc)
    reason = str(exc) if isinstance(exc, RecordError) else (exc.strerror or str(exc))
    name = path.name
    return name[:-5] or name, RecordState(path, (), None, reason)


def scan_pending(
    memory_dir: str | os.PathLike[str],
    sealed_fields: Sequence[str] = DEFAULT_SEALED_FIELDS,
    *,
    mode: str = DEFAULT_TESTIMONY,
) -> dict[str, RecordState]:
    """Read every ``memory_dir/<id>.json.pending`` (a re-save's new version, ``Tenant.save``).

    Returns:
        id -> ``RecordState`` of the pending file, for the files whose name is a valid id and
        whose record carries that id and can be sealed; any other such file is left out (it
        can never be settled; ``Tenant.seal`` removes it). Empty when the folder does not
        exist or is no folder (a symbolic link to a folder is refused by ``scan_records``
        first).

    Raises:
        RecordError: ``memory_dir`` not a path, ``sealed_fields`` not a sequence of ``str``,
            or an unknown ``mode`` (read as by ``scan_records``).
        OSError: the folder exists but cannot be listed.
    """
    return _scan_pending(memory_dir, sealed_fields, mode).settle


@dataclass(frozen=True, slots=True)
class _PendingFiles:
    """The ``<id>.json.pending`` files of a ``memory/`` folder whose name is a valid id.

    Attributes:
        settle: id -> state of each file that can be settled (``scan_pending``).
        leftovers: the files that can never be settled, so verify never reads them as a
            record: empty, torn or unparseable, carrying another id or none, not sealable,
            a symbolic link (never followed) or another file that is not a regular file.
        kept: ``(path, why)`` of each name that is neither: a folder (``"is a folder"``), or
            a file the system refuses to read (``"cannot be read (<strerror>)"``: it may hold
            an acknowledged version).
    """

    settle: dict[str, RecordState]
    leftovers: list[Path]
    kept: list[tuple[Path, str]]


def _scan_pending(
    memory_dir: str | os.PathLike[str],
    sealed_fields: Sequence[str],
    mode: str,
    only: str | None = None,
) -> _PendingFiles:
    """Sort the pending files of ``memory_dir`` (``only``: the one named for that id alone).

    Raises:
        As :func:`scan_pending`.
    """
    fields = check_sealed_fields(sealed_fields)
    mode = check_testimony_mode(mode)
    folder = as_path(memory_dir, "a memory folder", RecordError)
    found = _PendingFiles({}, [], [])
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return found
        with os.scandir(folder) as listing:
            names = sorted(
                (e.name, e.is_dir(follow_symlinks=False))
                for e in listing
                if e.name.endswith(PENDING_SUFFIX)
            )
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name, is_folder in names:
        stem = name[: -len(PENDING_SUFFIX)]
        if only is not None and stem != only:
            continue
        try:
            validate_record_id(stem)
        except RecordError:
            continue  # no record's name: never a re-save's file
        path = folder / name
        if is_folder:
            found.kept.append((path, "is a folder"))
            continue
        try:
            data = _read_bytes(path)
        except RecordError:  # a symbolic link, a FIFO, ...: never read, never settled
            found.leftovers.append(path)
            continue
        except OSError as exc:
            found.kept.append((path, f"cannot be read ({exc.strerror or exc})"))
            continue
        key, state = _scan_bytes(path, data, fields, mode)
        if state.sealable is not None and key == stem:
            found.settle[key] = state
        else:
            found.leftovers.append(path)
    return found


def pending_path(memory_dir: str | os.PathLike[str], record_id: str) -> Path:
    """``memory_dir/<id>.json.pending``: where a re-save keeps its new version until its line
    is durable (``Tenant.save``).

    Raises:
        RecordError: ``record_id`` fails ``validate_record_id``, or ``memory_dir`` is no path.
    """
    path = record_path(memory_dir, record_id)
    return path.with_name(path.name[: -len(".json")] + PENDING_SUFFIX)


def write_pending(memory_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Write ``memory_dir/<id>.json.pending`` as ``write_record`` writes ``<id>.json``.

    Returns:
        The pending file's path.

    Raises:
        The errors of :func:`write_record`.
    """
    target = pending_path(memory_dir, validate_record_id(_mapping(record).get("id")))
    atomic_write(target, record_bytes(record))
    return target


def record_bytes(record: Mapping[str, Any]) -> bytes:
    """A record file's content as ``write_record`` writes it: indented (2 spaces) UTF-8 JSON
    and a newline.

    Raises:
        RecordError: a value that is not JSON (or ``NaN``/``Infinity``), a key that is not
            a ``str``... anything ``json.dumps`` refuses.
    """
    try:
        try:
            text = indented_json(dict(record), "")
        except _Unusual:  # json.dumps decides (and names what it refuses)
            text = json.dumps(dict(record), ensure_ascii=False, indent=2, allow_nan=False)
        return (text + "\n").encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # also a lone surrogate
        raise RecordError(f"record cannot be written as JSON: {exc}") from None


class _Unusual(Exception):
    """A value :func:`indented_json` leaves to ``json.dumps``."""


_quote: Final = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses
_LITERALS: Final = {None: "null", True: "true", False: "false"}
_INFINITY: Final = float("inf")


def indented_json(value: Any, pad: str) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)`` for the values a
    record usually holds, at C speed per string (``json.dumps`` with ``indent`` runs its
    pure-Python encoder); byte for byte the same text (``tests/ledger/test_records.py``
    checks it against ``json.dumps`` on generated values).

    Args:
        value: ``dict`` (``str`` keys), ``list``, ``tuple``, ``str``, ``int``, finite
            ``float``, ``bool`` or ``None`` (exact types, nested at any depth).
        pad: the indentation of the line ``value`` starts on (``""`` at the top).

    Raises:
        _Unusual: anything else (a subclass, a non-``str`` key, NaN or infinity, an
            unknown type): ``json.dumps`` is the reference for those.
        RecursionError: a self-containing value.
    """
    kind = type(value)
    if kind is str:
        text: str = _quote(value)
        return text
    if kind is dict:
        if not value:
            return "{}"
        inner = pad + "  "
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            items.append(_quote(key) + ": " + indented_json(item, inner))
        return "{\n" + inner + (",\n" + inner).join(items) + "\n" + pad + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = pad + "  "
        return (
            "[\n"
            + inner
            + (",\n" + inner).join([indented_json(item, inner) for item in value])
            + "\n"
            + pad
            + "]"
        )
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value or value == _INFINITY or value == -_INFINITY:
            raise _Unusual
        return float.__repr__(value)
    if value is None or kind is bool:
        return _LITERALS[value]
    raise _Unusual


def write_record(memory_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Write ``memory_dir/<id>.json`` atomically and durably (temp, fsync, rename, fsync).

    Args:
        memory_dir: the tenant's ``memory/`` folder (created if missing).
        record: a JSON object with a valid ``id``; written as indented UTF-8 JSON.

    Returns:
        The file's path.

    Raises:
        RecordError: not a mapping with ``str`` keys, an invalid id, a value that is not
            JSON, or ``memory_dir`` not a path.
        OSError: from the file system.
    """
    path = record_path(memory_dir, validate_record_id(_mapping(record).get("id")))
    data = record_bytes(record)
    makedirs_durable(path.parent)
    atomic_write(path, data)
    return path
