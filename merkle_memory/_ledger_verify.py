"""Verify a ledger against the records on disk: the anchor's algorithm, streamed (private).

Follows mnemo-cortex's verify (research/mnemo.md section 2; DESIGN section 4) exactly, plus the
checks this library adds: strict lines (duplicate keys, NaN, extra or missing keys, a ``seq``
that is not a positive integer are breaks) and ``ledger.head``. Memory grows with the number of
distinct memory ids, not with the number of entries. Verify never changes a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._ledger_entry import (
    GENESIS,
    HASH_SPAN,
    fast_fields,
    hash_matches,
    parse_line_fast,
    schema_problem,
)
from ._ledger_tail import Head, read_head
from .errors import LedgerFormatError

__all__ = ["VerifyReport", "verify_ledger"]

_CUT0, _CUT1 = HASH_SPAN
REASON_UNPARSEABLE: Final = "unparseable line"
REASON_PREV: Final = "prev hash does not match the entry before it"
REASON_HASH: Final = "entry hash does not match its contents"

Testimony = Mapping[str, "str | Collection[str]"]
"""Memory id -> the current testimony digest(s) of the record file that exists. A value is one
64-char hex digest or a collection of acceptable digests (e.g. the RFC 8785 and the anchor
form); a value that is no 64-char hex digest (such as ``""`` for an unparseable file) never
matches."""


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The result of verifying a ledger (DESIGN section 4 report keys).

    Attributes:
        chain: ``"intact"``, ``"broken"`` or ``"empty"``.
        entries: number of non-blank lines read.
        broken_at: 1-based seq of the first break, or ``None``.
        reason: why the chain broke there, or ``None``.
        sealed: number of records whose trusted entry matches.
        altered: sorted ids whose record differs from its latest entry.
        missing: sorted ids with an entry but no record file.
        unsealed: sorted ids of records with no entry at all.
        disputed: sorted ids whose record matches only an untrusted entry (past the break).
    """

    chain: str
    entries: int
    broken_at: int | None
    reason: str | None
    sealed: int
    altered: tuple[str, ...]
    missing: tuple[str, ...]
    unsealed: tuple[str, ...]
    disputed: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Chain intact or empty, and nothing altered or missing (unsealed is not a failure)."""
        return self.chain in ("intact", "empty") and not self.altered and not self.missing

    def to_dict(self) -> dict[str, Any]:
        """The JSON report: exactly ``ok, chain, entries, broken_at, reason, sealed, altered,
        missing, unsealed, disputed`` (lists sorted)."""
        return {
            "ok": self.ok,
            "chain": self.chain,
            "entries": self.entries,
            "broken_at": self.broken_at,
            "reason": self.reason,
            "sealed": self.sealed,
            "altered": list(self.altered),
            "missing": list(self.missing),
            "unsealed": list(self.unsealed),
            "disputed": list(self.disputed),
        }

    def summary(self) -> str:
        """One line: ``ledger chain <chain> at seq <broken_at>: <reason>`` (or the state)."""
        if self.chain == "broken":
            return f"ledger chain broken at seq {self.broken_at}: {self.reason}"
        return f"ledger chain {self.chain} ({self.entries} entries)"


class _Walk:
    """State of one streamed walk over the ledger lines."""

    def __init__(self, head: Head | None) -> None:
        self.head = head
        self.entries = 0
        self.expect_seq = 1
        self.prev = GENESIS
        self.broken_at: int | None = None
        self.reason: str | None = None
        self.trusted: dict[str, str] = {}
        self.untrusted: dict[str, str] = {}
        # The last entry before any break, not yet committed to `trusted`: a prev mismatch on
        # the next line demotes it (positional trust, research/mnemo.md section 2).
        self.held: tuple[str, str] | None = None
        self.last_seq = 0

    def _break(self, at: int, reason: str, demote_prev: bool) -> None:
        self.broken_at = at
        self.reason = reason
        if self.held is not None:
            target = self.untrusted if demote_prev else self.trusted
            target[self.held[0]] = self.held[1]
            self.held = None

    def _gap(self, seq: object) -> None:
        self._break(
            self.expect_seq, f"sequence gap: expected {self.expect_seq}, found {seq}", False
        )

    def _advance(self, obj: dict[str, Any]) -> None:
        seq = obj.get("seq")
        if type(seq) is int:
            self.expect_seq = seq + 1
        self.prev = obj.get("hash")  # type: ignore[assignment]

    def _untrusted(self, obj: dict[str, Any]) -> None:
        mid, cs = obj.get("memory_id"), obj.get("content_sha256")
        if type(mid) is str and type(cs) is str:
            self.untrusted[mid] = cs

    def line(self, raw: bytes) -> None:
        stripped = raw.strip()
        if not stripped:
            return
        self.entries += 1
        if self.broken_at is None:
            fields = fast_fields(stripped)
            if fields is not None:
                self._fast(stripped, *fields)
                return
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError:
            obj, pre = None, None
        else:
            obj, pre = parse_line_fast(text)
        if self.broken_at is not None:  # past the first break: bookkeeping only
            if obj is not None:
                self._untrusted(obj)
                self._advance(obj)
            return
        if obj is None:
            self._break(self.expect_seq, REASON_UNPARSEABLE, False)
            return
        problem = schema_problem(obj) if pre is None else None
        seq = obj.get("seq")
        if problem is not None:
            self._break(self.expect_seq, problem, False)
        elif seq != self.expect_seq:
            self._break(
                self.expect_seq, f"sequence gap: expected {self.expect_seq}, found {seq}", False
            )
        elif not hmac.compare_digest(obj["prev"], self.prev):
            self._break(seq, REASON_PREV, True)
        elif not self._hash_ok(obj, pre):
            self._break(seq, REASON_HASH, False)
        elif (
            self.head is not None
            and seq == self.head.seq
            and not hmac.compare_digest(obj["hash"], self.head.hash)
        ):
            self._break(seq, f"ledger.head records a different entry at seq {seq}", False)
        if self.broken_at is not None:
            self._untrusted(obj)
        else:
            if self.held is not None:
                self.trusted[self.held[0]] = self.held[1]
            self.held = (obj["memory_id"], obj["content_sha256"])
            self.last_seq = obj["seq"]
        self._advance(obj)

    def _fast(self, line: bytes, seq: int, mid: str, cs: str, prev: str, claimed: str) -> None:
        """``line`` for a line in this library's canonical form (see ``fast_fields``)."""
        if seq != self.expect_seq:
            self._break(
                self.expect_seq, f"sequence gap: expected {self.expect_seq}, found {seq}", False
            )
        elif not hmac.compare_digest(prev, self.prev):
            self._break(seq, REASON_PREV, True)
        elif not hmac.compare_digest(
            claimed, hashlib.sha256(line[:_CUT0] + line[_CUT1:]).hexdigest()
        ):
            self._break(seq, REASON_HASH, False)
        elif self.head is not None and seq == self.head.seq and claimed != self.head.hash:
            self._break(seq, f"ledger.head records a different entry at seq {seq}", False)
        if self.broken_at is not None:
            self.untrusted[mid] = cs
        else:
            if self.held is not None:
                self.trusted[self.held[0]] = self.held[1]
            self.held = (mid, cs)
            self.last_seq = seq
        self.expect_seq = seq + 1
        self.prev = claimed

    @staticmethod
    def _hash_ok(obj: dict[str, Any], pre: str | None) -> bool:
        claimed = obj["hash"]
        if pre is not None:
            calc = hashlib.sha256(pre.encode("utf-8")).hexdigest()
            if hmac.compare_digest(claimed, calc):
                return True
        return hash_matches(claimed, {k: v for k, v in obj.items() if k != "hash"})

    def finish(self, head_error: str | None) -> None:
        if self.broken_at is None and head_error is not None:
            self._break(self.last_seq + 1, head_error, False)
        elif self.broken_at is None and self.head is not None and self.head.seq > self.last_seq:
            self._break(
                self.last_seq + 1,
                f"ledger.head records a later entry (seq {self.head.seq}) than the ledger holds"
                f" (last seq {self.last_seq})",
                False,
            )
        if self.held is not None:
            self.trusted[self.held[0]] = self.held[1]
            self.held = None


def _matches(claimed: str, testimony: str | Collection[str]) -> bool:
    if len(claimed) != 64 or not claimed.isascii():
        return False
    if isinstance(testimony, str):
        return testimony.isascii() and hmac.compare_digest(claimed, testimony)
    return any(isinstance(t, str) and _matches(claimed, t) for t in testimony)


def _read_head(ledger: Path) -> tuple[Head | None, str | None]:
    try:
        return read_head(ledger.with_name("ledger.head")), None
    except LedgerFormatError as exc:
        return None, str(exc)


def verify_ledger(
    path: str | os.PathLike[str], testimony: Testimony | Callable[[], Testimony]
) -> VerifyReport:
    """Walk the ledger and judge every record (research/mnemo.md section 2; DESIGN section 4).

    Args:
        path: the ``ledger.jsonl`` file (a missing file is an empty ledger); ``ledger.head``
            beside it is read when present.
        testimony: memory id -> current testimony digest(s) of each record file that exists
            (see ``Testimony``); ids of unparseable files map to ``""`` so they never match.
            Or a function returning that mapping: it is then called after ``ledger.head`` is
            read and the ledger's size noted (under a brief shared ``flock``, so no append
            is half-written at that point), and only that many bytes of the ledger are
            walked. Records are durable before their lines, so a writer saving while verify
            runs can make a record read ``unsealed`` (its line came after the snapshot) but
            never ``missing`` (DESIGN section 4 append order). Use this form for live stores.

    Returns:
        A ``VerifyReport``. A trusted entry is one before the first break (at a prev mismatch
        the entry before the break is demoted too); the last entry per id wins on each side;
        a trusted verdict is never overruled by an untrusted entry.

    Raises:
        OSError: the ledger exists but cannot be read.
    """
    ledger = Path(path)
    try:
        handle = open(ledger, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        handle = None
    limit: int | None = None
    if callable(testimony) and handle is not None:
        # A consistent point between two appends: writers hold LOCK_EX from their line to
        # their head update, so under LOCK_SH the file holds no half-written line.
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        try:
            head, head_error = _read_head(ledger)
            limit = os.fstat(handle.fileno()).st_size
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    else:
        head, head_error = _read_head(ledger)
    if callable(testimony):
        testimony = testimony()
    walk = _Walk(head)
    if handle is not None:
        with handle:
            consumed = 0
            for raw in handle:
                if limit is not None:
                    if consumed >= limit:
                        break
                    raw = raw[: limit - consumed]
                    consumed += len(raw)
                walk.line(raw)
    walk.finish(head_error)
    sealed = 0
    altered: list[str] = []
    missing: list[str] = []
    disputed: list[str] = []
    for mid, claimed in walk.trusted.items():
        if mid not in testimony:
            missing.append(mid)
        elif _matches(claimed, testimony[mid]):
            sealed += 1
        else:
            altered.append(mid)
    for mid, claimed in walk.untrusted.items():
        if mid in walk.trusted:
            continue  # a trusted verdict stands
        if mid not in testimony:
            missing.append(mid)
        elif _matches(claimed, testimony[mid]):
            disputed.append(mid)
        else:
            altered.append(mid)
    unsealed = [m for m in testimony if m not in walk.trusted and m not in walk.untrusted]
    if walk.broken_at is not None:
        chain = "broken"
    elif walk.entries == 0:
        chain = "empty"
    else:
        chain = "intact"
    return VerifyReport(
        chain=chain,
        entries=walk.entries,
        broken_at=walk.broken_at,
        reason=walk.reason,
        sealed=sealed,
        altered=tuple(sorted(altered)),
        missing=tuple(sorted(missing)),
        unsealed=tuple(sorted(unsealed)),
        disputed=tuple(sorted(disputed)),
    )
