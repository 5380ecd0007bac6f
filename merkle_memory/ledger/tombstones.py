"""Tombstones: the sealed record that a memory was erased on purpose (issue 20).

Forgetting a record (``Tenant.forget``, ``MemoryBank.forget``) removes its file and appends a
ledger entry with ``op: "forget"`` whose ``content_sha256`` is the digest of a *tombstone*::

    {"forgotten_at": "2026-05-29T12:00:00.000000Z", "memory_id": "note-1",
     "reason": "user asked", "retires": "<64 hex>", "schema": "merkle-memory/tombstone/1"}

``retires`` is the testimony the ledger had sealed for the record (the ``content_sha256`` of
its latest entry), so the tombstone names exactly what it erased without holding any of it.
The tombstone's digest is SHA-256 of its RFC 8785 bytes; all its values are strings, so the
anchor's ``json.dumps`` form gives the same bytes. The tombstone is kept beside the store as
``forgotten/<id>.json`` (those bytes and a newline): with the entry and an inclusion proof
against a later checkpoint it is the receipt that the record existed and was erased.

A forget in progress keeps its tombstone as ``forgotten/<id>.json.pending`` until the record
file is gone (docs/THREAT_MODEL.md, "Forgetting"); verify then reads the id as ``forgotten``.

:func:`forget_locked` is the one forget algorithm (a tenant's records and a bank's memories
both use it, as both use one adopt algorithm; a database tenant too, with its tombstones in a
table), :func:`forget_record` runs it on a store folder, and :func:`settle_forgets` finishes
or drops a forget a crash interrupted.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from .. import canonical
from .._fsio import atomic_write, fsync_dir, makedirs_durable, read_regular_file
from .._json import HEX64, has_surrogate
from ..errors import (
    CanonicalizationError,
    LedgerBrokenError,
    LedgerFormatError,
    MerkleMemoryError,
    RecordError,
    StoreFileError,
)
from ._chain import Ledger
from ._entry import Entry, as_path
from ._tail import iter_objects_naming
from ._verify import verify_ledger

__all__ = [
    "FORGOTTEN_DIR",
    "MAX_REASON_CHARS",
    "TOMBSTONE_PENDING_SUFFIX",
    "TOMBSTONE_SCHEMA",
    "FolderTombstones",
    "ForgetReceipt",
    "Locate",
    "Tombstone",
    "TombstoneKeeper",
    "check_reason",
    "forget_locked",
    "forget_record",
    "latest_entry",
    "read_tombstone",
    "scan_pending_tombstones",
    "settle_forgets",
    "tombstone_path",
    "tombstone_pending_path",
]

TOMBSTONE_SCHEMA: Final = "merkle-memory/tombstone/1"
"""The ``schema`` value of a tombstone (the version of its hashed form)."""

FORGOTTEN_DIR: Final = "forgotten"
"""The folder, beside ``ledger.jsonl``, that keeps the tombstones (``forgotten/<id>.json``)."""

TOMBSTONE_PENDING_SUFFIX: Final = ".json.pending"
"""Suffix of a tombstone whose forget is under way (``forgotten/<id>.json.pending``)."""

MAX_REASON_CHARS: Final = 4096
"""Longest reason a tombstone keeps, in characters."""

_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_KEYS: Final = frozenset({"schema", "memory_id", "reason", "forgotten_at", "retires"})


def check_reason(reason: Any) -> str:
    """Return ``reason`` after checking a new forget may record it: a tombstone says why.

    Raises:
        LedgerFormatError: not a ``str``, empty or only whitespace, longer than
            ``MAX_REASON_CHARS``, or holding a lone surrogate (no UTF-8 form).
    """
    text = _reason_shape(reason)
    if not text.strip():
        raise LedgerFormatError("a reason must not be empty: say why the record is forgotten")
    return text


def _reason_shape(reason: Any) -> str:
    """The checks a tombstone read back passes (an empty reason included: files written
    before empty reasons were refused still read)."""
    if type(reason) is not str:
        raise LedgerFormatError(f"a reason is a string, not {type(reason).__name__}")
    if len(reason) > MAX_REASON_CHARS:
        raise LedgerFormatError(f"a reason is at most {MAX_REASON_CHARS} characters")
    if has_surrogate(reason):
        raise LedgerFormatError("a reason must not hold a lone surrogate")
    text: str = reason
    return text


def _now() -> str:
    t = datetime.now(UTC)
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        f".{t.microsecond:06d}Z"
    )


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What was erased, when and why, without any of its content.

    Attributes:
        memory_id: the forgotten record's id (a tenant's record id, a bank's 64-hex id).
        reason: the caller's reason, free text (at most ``MAX_REASON_CHARS`` characters; it
            is kept, so it must not repeat the content it erases).
        forgotten_at: UTC time of the forget, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
        retires: the testimony digest the ledger had sealed for the record (64-char
            lowercase hex).

    Raises:
        LedgerFormatError: on construction, any field outside those shapes.
    """

    memory_id: str
    reason: str
    forgotten_at: str
    retires: str

    def __post_init__(self) -> None:
        mid = self.memory_id
        if type(mid) is not str or not mid or has_surrogate(mid):
            raise LedgerFormatError(f"a tombstone's memory_id is a non-empty string: {mid!r:.80}")
        _reason_shape(self.reason)
        if type(self.forgotten_at) is not str or _TIME.fullmatch(self.forgotten_at) is None:
            raise LedgerFormatError(
                f"forgotten_at is YYYY-MM-DDTHH:MM:SS.ffffffZ, not {self.forgotten_at!r:.80}"
            )
        if type(self.retires) is not str or HEX64.fullmatch(self.retires) is None:
            raise LedgerFormatError(f"retires is 64-char lowercase hex, not {self.retires!r:.80}")

    @classmethod
    def create(cls, memory_id: str, reason: str, retires: str) -> Tombstone:
        """A tombstone forgetting ``memory_id`` now (``forgotten_at`` is the current UTC time).

        Raises:
            LedgerFormatError: a field outside the shapes of :class:`Tombstone`.
        """
        return cls(memory_id, reason, _now(), retires)

    def body(self) -> dict[str, str]:
        """The hashed form: ``{"schema", "memory_id", "reason", "forgotten_at", "retires"}``."""
        return {
            "schema": TOMBSTONE_SCHEMA,
            "memory_id": self.memory_id,
            "reason": self.reason,
            "forgotten_at": self.forgotten_at,
            "retires": self.retires,
        }

    def to_bytes(self) -> bytes:
        """The tombstone file: the RFC 8785 bytes of :meth:`body` and a newline."""
        return canonical.dumps(self.body()) + b"\n"

    def digest(self) -> str:
        """SHA-256 of the RFC 8785 bytes of :meth:`body` (the forget entry's
        ``content_sha256``), 64-char lowercase hex."""
        return canonical.digest(self.body())

    @classmethod
    def from_dict(cls, value: Any) -> Tombstone:
        """Read a tombstone's JSON object strictly (exactly the five keys, this schema).

        Raises:
            LedgerFormatError: not an object, other keys, another schema, or a bad field.
        """
        if type(value) is not dict or value.keys() != _KEYS:
            raise LedgerFormatError(
                f"a tombstone is an object with exactly the keys {', '.join(sorted(_KEYS))}"
            )
        if value["schema"] != TOMBSTONE_SCHEMA:
            raise LedgerFormatError(f"unknown tombstone schema {value['schema']!r:.80}")
        return cls(value["memory_id"], value["reason"], value["forgotten_at"], value["retires"])

    @classmethod
    def from_bytes(cls, data: bytes) -> Tombstone:
        """Parse a tombstone file (strict JSON; a final newline is allowed).

        Raises:
            LedgerFormatError: unparseable, or not a tombstone (see :meth:`from_dict`).
        """
        try:
            value = canonical.loads(data.removesuffix(b"\n"))
        except CanonicalizationError as exc:
            raise LedgerFormatError(f"unparseable tombstone: {exc}") from None
        return cls.from_dict(value)


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """The result of a forget: the tombstone and the ledger entry that seals it.

    Attributes:
        memory_id: the forgotten id.
        entry: the ``forget`` entry (``content_sha256`` is ``tombstone.digest()``); for an id
            forgotten by an earlier call, that call's entry.
        tombstone: the tombstone; ``None`` only when an earlier forget's tombstone file is
            gone or no longer matches its entry (the entry still records the forget).
        removed: this call removed a record file.
        already_forgotten: the id was forgotten by an earlier call (no entry was appended;
            a record file put back since, if any, was removed: ``removed``).
        was_altered: the record file removed was ``altered`` (forgotten with ``force``):
            the tombstone retires the sealed digest, not what the file held.
    """

    memory_id: str
    entry: Entry
    tombstone: Tombstone | None
    removed: bool
    already_forgotten: bool = False
    was_altered: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"memory_id", "seq", "content_sha256", "removed", "already_forgotten",
        "was_altered", "tombstone": body or null, "entry": the entry object}``."""
        return {
            "memory_id": self.memory_id,
            "seq": self.entry.seq,
            "content_sha256": self.entry.content_sha256,
            "removed": self.removed,
            "already_forgotten": self.already_forgotten,
            "was_altered": self.was_altered,
            "tombstone": None if self.tombstone is None else self.tombstone.body(),
            "entry": self.entry.to_dict(),
        }


def tombstone_path(store_dir: str | os.PathLike[str], memory_id: str) -> Path:
    """``STORE/forgotten/<memory_id>.json`` (the caller has validated the id as a file name)."""
    return as_path(store_dir, "a store folder") / FORGOTTEN_DIR / f"{memory_id}.json"


def tombstone_pending_path(store_dir: str | os.PathLike[str], memory_id: str) -> Path:
    """``STORE/forgotten/<memory_id>.json.pending``: a tombstone whose forget is under way."""
    path = tombstone_path(store_dir, memory_id)
    return path.with_name(path.name + ".pending")


def _refuse(path: str, reason: str) -> Exception:
    return StoreFileError(path, reason)


def read_tombstone(path: str | os.PathLike[str]) -> Tombstone | None:
    """Read one tombstone file; ``None`` when it does not exist.

    Raises:
        StoreFileError: a symbolic link or not a regular file (never followed or opened).
        LedgerFormatError: not a tombstone.
        OSError: it exists but cannot be read.
    """
    data = read_regular_file(as_path(path, "a tombstone path"), _refuse)
    return None if data is None else Tombstone.from_bytes(data)


def scan_pending_tombstones(store_dir: str | os.PathLike[str]) -> dict[str, Tombstone]:
    """Every readable ``forgotten/<id>.json.pending`` whose tombstone names ``<id>``.

    Returns:
        id -> tombstone, for forgets under way (or interrupted); a pending file that is not
        a regular file, does not parse, or names another id is left out (and never
        settled). Empty when ``forgotten/`` does not exist.

    Raises:
        OSError: ``forgotten/`` exists but cannot be listed.
    """
    folder = as_path(store_dir, "a store folder") / FORGOTTEN_DIR
    try:
        with os.scandir(folder) as listing:
            names = sorted(e.name for e in listing if e.name.endswith(TOMBSTONE_PENDING_SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found: dict[str, Tombstone] = {}
    for name in names:
        try:
            tomb = read_tombstone(folder / name)
        except (LedgerFormatError, StoreFileError, OSError):
            continue
        if tomb is not None and name == tomb.memory_id + TOMBSTONE_PENDING_SUFFIX:
            found[tomb.memory_id] = tomb
    return found


Locate = Callable[[str], "Path | None"]
"""Memory id -> the record file that holds it now (``None`` when there is none)."""

H = TypeVar("H")
"""What a store's ``locate`` gives for a record (a path, a database row)."""


def latest_entry(ledger: Ledger, memory_id: str) -> Entry | None:
    """The last whole, well-formed entry line naming ``memory_id``, in any valid line form.

    The lines naming the id in any valid form (``_tail.iter_objects_naming``: this library's,
    the anchor's, other spacing, escapes, key order, CRLF), read from the last back; the
    first that is a well-formed entry (``Entry.from_dict``, its hash not checked: verify
    judges the chain) is returned. About one read of the ledger, a parse only for lines that
    may name the id: O(ledger size).

    Args:
        ledger: the store's ledger.
        memory_id: the record's id.

    Returns:
        The entry, or ``None`` when no line is an entry of the id.

    Raises:
        OSError: the ledger cannot be read.
    """
    with ledger.store.reader() as file:
        if file is None:
            return None
        for obj in iter_objects_naming(file, file.size(), memory_id):  # last first
            try:
                return Entry.from_dict(obj, check_hash=False)
            except LedgerFormatError:
                continue
    return None


def _remove(path: Path | None) -> bool:
    """Unlink a record file and fsync its folder; ``False`` when there is none."""
    if path is None or not os.path.lexists(path):
        return False
    os.unlink(path)
    fsync_dir(path.parent)
    return True


def _finish(store_dir: Path, memory_id: str, locate: Locate) -> bool:
    """Steps (3) and (4) of a forget whose line is durable: remove the record (fsync its
    folder), rename the tombstone into place (fsync ``forgotten/``). Returns whether a
    record file was removed."""
    removed = _remove(locate(memory_id))
    os.replace(tombstone_pending_path(store_dir, memory_id), tombstone_path(store_dir, memory_id))
    fsync_dir(store_dir / FORGOTTEN_DIR)
    return removed


def settle_forgets(
    ledger: Ledger,
    store_dir: str | os.PathLike[str],
    locate: Locate,
    *,
    only: str | None = None,
) -> set[str]:
    """Finish or drop each forget a crash interrupted (the caller holds the ledger lock).

    A pending tombstone whose digest is its id's latest entry (a ``forget``) was
    acknowledged: the record is removed and the tombstone renamed into place. Any other
    pending tombstone never got its line: it is removed (the record stays sealed).

    Args:
        ledger: the store's ledger.
        store_dir: the folder holding ``ledger.jsonl`` and ``forgotten/``.
        locate: finds an id's record file.
        only: settle this id alone.

    Returns:
        The ids whose record file this removed.

    Raises:
        OSError: from the file system.
    """
    folder = as_path(store_dir, "a store folder")
    removed: set[str] = set()
    dropped = False
    for mid, tomb in scan_pending_tombstones(folder).items():
        if only is not None and mid != only:
            continue
        latest = latest_entry(ledger, mid)
        if latest is not None and latest.op == "forget" and latest.content_sha256 == tomb.digest():
            if _finish(folder, mid, locate):
                removed.add(mid)
        else:
            os.unlink(tombstone_pending_path(folder, mid))
            dropped = True
    if dropped:
        fsync_dir(folder / FORGOTTEN_DIR)
    return removed


class TombstoneKeeper(ABC, Generic[H]):
    """Where a store keeps its tombstones and removes its records: the storage steps of
    :func:`forget_locked` (a folder's ``forgotten/`` files, :class:`FolderTombstones`, or a
    database's rows). ``H`` is what ``locate`` gives for a record (a path, a row)."""

    @abstractmethod
    def settle(self, memory_id: str) -> bool:
        """Finish or drop a forget of ``memory_id`` a crash interrupted; whether a record
        was removed by finishing it."""

    @abstractmethod
    def remove_record(self, memory_id: str) -> bool:
        """Remove the record holding ``memory_id`` now; ``False`` when there is none."""

    @abstractmethod
    def stored(self, memory_id: str) -> Tombstone | None:
        """The tombstone kept for ``memory_id``, or ``None`` (none, or not readable)."""

    @abstractmethod
    def seal(self, tomb: Tombstone, append: Callable[[], Entry]) -> tuple[Entry, bool]:
        """Keep ``tomb``, call ``append`` (the ``forget`` entry) and remove the record, in
        the store's crash-safe order; ``(the entry, whether a record was removed)``. When
        ``append`` raises, nothing of this call is kept."""


class FolderTombstones(TombstoneKeeper[Path]):
    """The tombstones of a store folder (``forgotten/<id>.json``, a pending one while its
    forget is under way) and its record files, found by ``locate``."""

    def __init__(self, ledger: Ledger, store_dir: Path, locate: Locate) -> None:
        self._ledger = ledger
        self._folder = store_dir
        self._locate = locate

    def settle(self, memory_id: str) -> bool:
        """See :func:`settle_forgets`."""
        removed = settle_forgets(self._ledger, self._folder, self._locate, only=memory_id)
        return memory_id in removed

    def remove_record(self, memory_id: str) -> bool:
        """Unlink the record file and fsync its folder."""
        return _remove(self._locate(memory_id))

    def stored(self, memory_id: str) -> Tombstone | None:
        """``forgotten/<id>.json`` (``None`` when missing, not a regular file, malformed)."""
        try:
            return read_tombstone(tombstone_path(self._folder, memory_id))
        except (LedgerFormatError, StoreFileError):
            return None

    def seal(self, tomb: Tombstone, append: Callable[[], Entry]) -> tuple[Entry, bool]:
        """(1) ``forgotten/<id>.json.pending`` (temp, fsync, rename, fsync the folder); (2)
        ``append``; (3) unlink the record, fsync its folder; (4) rename the tombstone into
        place, fsync ``forgotten/``. A refused append removes the pending tombstone."""
        makedirs_durable(self._folder / FORGOTTEN_DIR)
        pending = tombstone_pending_path(self._folder, tomb.memory_id)
        atomic_write(pending, tomb.to_bytes())
        try:
            entry = append()
        except MerkleMemoryError:
            os.unlink(pending)  # refused: nothing names this tombstone
            fsync_dir(self._folder / FORGOTTEN_DIR)
            raise
        return entry, _finish(self._folder, tomb.memory_id, self._locate)


def forget_record(
    ledger: Ledger,
    store_dir: str | os.PathLike[str],
    memory_id: str,
    reason: str,
    locate: Locate,
    unsealed_testimony: Callable[[Path], str],
    nothing: Callable[[str], Exception],
    *,
    forms: Callable[[Path], tuple[str, ...]] | None = None,
    force: bool = False,
    label: str = "",
) -> ForgetReceipt:
    """The forget of a store folder: :func:`forget_locked` under the ledger lock with its
    tombstones in ``forgotten/`` (:class:`FolderTombstones`).

    Each step durable before the next: (1) write the tombstone as
    ``forgotten/<id>.json.pending`` (temp file, fsync, rename, fsync the folder); (2) append
    the ``forget`` entry (line fsynced, then ``ledger.head``); (3) remove the record file
    and fsync its folder; (4) rename the tombstone to ``forgotten/<id>.json`` and fsync
    ``forgotten/``. A forget a crash interrupted is settled first (:func:`settle_forgets`).

    Args:
        ledger: the store's ledger.
        store_dir: the folder holding ``ledger.jsonl`` (``forgotten/`` goes beside it).
        memory_id, reason, locate, unsealed_testimony, nothing, forms, force, label: see
            :func:`forget_locked`.

    Returns:
        A :class:`ForgetReceipt`.

    Raises:
        The errors of :func:`forget_locked`; OSError: from the file system.
    """
    folder = as_path(store_dir, "a store folder")
    reason = check_reason(reason)
    with ledger.locked():
        keeper = FolderTombstones(ledger, folder, locate)
        return forget_locked(
            ledger,
            keeper,
            memory_id,
            reason,
            locate,
            unsealed_testimony,
            nothing,
            forms=forms,
            force=force,
            label=label,
        )


def forget_locked(
    ledger: Ledger,
    keeper: TombstoneKeeper[H],
    memory_id: str,
    reason: str,
    locate: Callable[[str], H | None],
    unsealed_testimony: Callable[[H], str],
    nothing: Callable[[str], Exception],
    *,
    forms: Callable[[H], tuple[str, ...]] | None = None,
    force: bool = False,
    label: str = "",
) -> ForgetReceipt:
    """The one forget algorithm: seal a tombstone, then remove the record (the caller holds
    the ledger lock; ``keeper`` does the storage steps in its store's order).

    The chain is verified first: a broken chain is refused with nothing changed (a forget
    entry past a break could not vouch for anything). A forget a crash interrupted is
    settled (``keeper.settle``). When the id's latest entry is already a ``forget``, nothing
    is appended: a record put back since is removed and the earlier receipt returned.
    Otherwise the tombstone retires the testimony of the id's latest entry (for a record
    never sealed: its current testimony) and ``keeper.seal`` keeps it, appends the
    ``forget`` entry and removes the record.

    Args:
        ledger: the store's ledger (locked by the caller).
        keeper: the store's tombstones and records.
        memory_id: the id (already checked by the caller).
        reason: kept in the tombstone (:func:`check_reason`).
        locate: finds the record holding the id now.
        unsealed_testimony: the testimony of a record no entry seals (the tombstone
            retires it); may raise the caller's error when the record cannot be read.
        nothing: makes the error raised when neither a record nor an entry names the id.
        forms: the acceptable testimony digests of the record (``()`` when it cannot be
            read); when given, a record verify reads ``altered`` (it no longer matches its
            latest entry) is refused unless ``force``, since removing it would erase the
            evidence of the tampering.
        force: forget an ``altered`` record anyway (the receipt says ``was_altered``).
        label: prefixes the refusals' messages (e.g. ``"cc: "``).

    Returns:
        A :class:`ForgetReceipt`.

    Raises:
        LedgerFormatError: a bad reason (nothing is written).
        Exception: ``nothing(memory_id)``, or what ``unsealed_testimony`` raises (nothing is
            written).
        LedgerBrokenError: the chain is broken (``.report`` holds the verify report; nothing
            is written or removed).
        RecordError: the record is ``altered`` and ``force`` is false (nothing is written).
        LedgerBrokenError, LedgerRollbackError: the append was refused (nothing of this
            forget is kept).
    """
    reason = check_reason(reason)
    found = locate(memory_id)
    held = {} if forms is None or found is None else {memory_id: forms(found)}
    report = verify_ledger(ledger.store, held)
    if report.chain == "broken":
        raise LedgerBrokenError(f"{label}{report.summary()}; refusing to forget", report)
    finished = keeper.settle(memory_id)
    latest = latest_entry(ledger, memory_id)
    current = locate(memory_id)
    altered = (
        forms is not None
        and memory_id in report.altered
        and latest is not None
        and latest.op != "forget"
    )
    if altered and not force:
        raise RecordError(
            f"{label}{memory_id!r} is altered (its file no longer matches its entry at seq "
            f"{latest.seq if latest else 0}); forgetting it would erase the evidence of "
            "the change: look at the file first, then forget it with force (--force)"
        )
    if latest is not None and latest.op == "forget":
        removed = keeper.remove_record(memory_id) if current is not None else False
        tomb = keeper.stored(memory_id)
        if tomb is not None and tomb.digest() != latest.content_sha256:
            tomb = None
        return ForgetReceipt(memory_id, latest, tomb, removed or finished, True)
    if latest is not None:
        retires = latest.content_sha256
    elif current is not None:
        retires = unsealed_testimony(current)
    else:
        raise nothing(memory_id)
    tomb = Tombstone.create(memory_id, reason, retires)
    entry, removed = keeper.seal(tomb, lambda: ledger.append(memory_id, tomb.digest(), op="forget"))
    return ForgetReceipt(memory_id, entry, tomb, removed, was_altered=altered)
