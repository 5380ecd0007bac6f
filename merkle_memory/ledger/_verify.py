"""Verify a ledger against the records on disk: the anchor's algorithm, streamed (private).

Follows mnemo-cortex's verify (research/mnemo.md section 2; DESIGN section 4) exactly, plus the
checks this library adds: strict lines (duplicate keys, NaN, extra or missing keys, a ``seq``
that is not a positive integer are breaks) and ``ledger.head``. Memory grows with the number of
distinct memory ids, not with the number of entries. Verify never changes a file.

Speed: the file is read in 1 MiB blocks; a line in either usual shape (this library's RFC 8785
line or the anchor's ``json.dumps`` line) that continues an intact chain is accepted by the
walk's inline loop (``_Walk.feed``: the walk's state in local variables, one regex match, one
SHA-256 of its preimage, no JSON parse, no encode, no call per line); every other line goes
through the general path (strict parse, both hash forms), which alone decides breaks and their
reasons. At 1,000,000 entries this is about 1.0-1.1x the floor "json.loads + sha256 per line"
(docs/PERFORMANCE.md, "Ledger").
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._progress import ProgressCallback
from ..errors import LedgerError, LedgerFormatError
from ._entry import (
    _HEX,
    _MID,
    _PREIMAGE,
    _SEQ,
    _TS,
    GENESIS,
    HASH_SPAN,
    hash_matches,
    match_line,
    parse_line,
    schema_problem,
    ts_literal_ok,
)
from ._folder import as_store
from ._tail import is_complete_object, iter_line_blocks, split_fragment
from .storage import Head, LedgerStore

__all__ = ["Testimony", "VerifyReport", "verify_ledger"]

_BLOCK: Final = 1 << 20

_ANY64: Final = rb'"([^"]{64})"'
_FAST_LINE: Final = re.compile(
    rb'\{"content_sha256":' + _HEX + rb',"hash":' + _ANY64 + rb',"memory_id":' + _MID
    + rb',"op":"(save|adopt|forget)","prev":' + _ANY64 + rb',"seq":' + _SEQ + rb',"ts":' + _TS
    + rb"\}"
)  # fmt: skip
"""``_entry.CANONICAL_LINE`` with any 64 bytes but a quote for ``hash`` and ``prev`` (the
regex engine's per-byte class test was a fifth of the walk): the fast loop accepts a line only
when its ``hash`` equals the SHA-256 hex digest of its preimage and its ``prev`` the hash
before it, which are both 64-char lowercase hex, so it accepts exactly the lines it accepted
with ``CANONICAL_LINE``."""

_FAST_ANCHOR: Final = re.compile(
    rb'\{"seq": ' + _SEQ + rb', "ts": ' + _TS + rb', "op": "(save|adopt|forget)", "memory_id": '
    + _MID + rb', "content_sha256": ' + _HEX + rb', "prev": ' + _ANY64 + rb', "hash": ' + _ANY64
    + rb"\}"
)  # fmt: skip
"""``_entry.ANCHOR_LINE`` relaxed in the same way (groups: seq, ts, op, memory_id,
content_sha256, prev, hash)."""
REASON_UNPARSEABLE: Final = "unparseable line"
REASON_PREV: Final = "prev hash does not match the entry before it"
REASON_HASH: Final = "entry hash does not match its contents"

Testimony = Mapping[str, "str | Collection[str]"]
"""Memory id -> the current testimony digest(s) of the record file that exists. A value is one
64-char hex digest or a collection of acceptable digests (e.g. the RFC 8785 and the anchor
form); a value that is no 64-char hex digest (such as ``""`` for an unparseable file) never
matches. A store whose forget of an id is under way (its tombstone written and sealed, the
record file not yet removed) adds the tombstone's digest to that id's digests, so the id reads
``forgotten`` rather than ``reappeared`` (``Tenant.forget``)."""


class _Tombstone(str):
    """The ``content_sha256`` of a ``forget`` entry: a digest that says the record is gone."""

    __slots__ = ()


def _claim(op: object, digest: str) -> str:
    """``digest`` as the walk keeps it: marked as a tombstone for a ``forget`` entry."""
    return _Tombstone(digest) if op == "forget" else digest


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
        disputed: sorted ids whose record matches only an untrusted entry (past the break),
            or whose record is gone and only an untrusted ``forget`` entry says why.
        ignored_claimants: ``(id, file)`` of each record file that claims an id another file
            speaks for and testifies differently (a tenant's ``memory/<id>.json`` speaks;
            ``file`` is the ignored file's path relative to the store's folder, e.g.
            ``"memory/copy.json"``), sorted; never read as the record, so it changes no
            verdict and not ``ok``. Empty unless the caller scanned the records
            (``Tenant.verify`` and ``Tenant.seal`` do; ``verify_ledger`` alone does not).
        forgotten: sorted ids whose latest trusted entry is a ``forget`` (a tombstone) and
            whose record is gone (or is being removed by a forget under way): erased on
            purpose, not a failure.
        reappeared: sorted ids whose latest entry is a ``forget`` but whose record file is
            there again (a restore from a backup, a copy put back): the content the ledger
            says was erased is back, so ``ok`` is false. Forgetting the id again removes it.
        torn_tail: ``(byte offset, length in bytes)`` of a torn tail, or ``None``: the bytes
            after the last newline when they are not a complete JSON object (what a crash
            in the middle of an append leaves; DESIGN section 4, "Torn tail"). It is not an
            entry (not counted in ``entries``), does not break the chain and does not change
            ``ok``: the next append (``save``, ``seal``, ``Ledger.recover``) moves it to
            ``ledger.torn``. An unterminated last line that is a complete JSON object is a
            line like any other (judged, and counted), and a bad line that ends with a
            newline is a break, never a torn tail.
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
    ignored_claimants: tuple[tuple[str, str], ...] = ()
    forgotten: tuple[str, ...] = ()
    reappeared: tuple[str, ...] = ()
    torn_tail: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        """Chain intact or empty, and nothing altered, missing or reappeared (unsealed and
        forgotten are not failures)."""
        return (
            self.chain in ("intact", "empty")
            and not self.altered
            and not self.missing
            and not self.reappeared
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report: ``ok, chain, entries, broken_at, reason, sealed, altered, missing,
        unsealed, disputed`` (lists sorted), plus ``forgotten`` and ``reappeared`` (sorted
        id lists) and ``ignored_claimants`` (a list of ``{"id", "file"}`` objects), each only
        when it is not empty (``docs/DECISIONS.md``, "Ignored claimants" and "Forgetting"),
        and ``torn_tail`` (``{"offset", "length"}``, byte offset and length) only when there
        is one."""
        out: dict[str, Any] = {
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
        if self.forgotten:
            out["forgotten"] = list(self.forgotten)
        if self.reappeared:
            out["reappeared"] = list(self.reappeared)
        if self.ignored_claimants:
            out["ignored_claimants"] = [
                {"id": mid, "file": file} for mid, file in self.ignored_claimants
            ]
        if self.torn_tail is not None:
            out["torn_tail"] = {"offset": self.torn_tail[0], "length": self.torn_tail[1]}
        return out

    def summary(self) -> str:
        """One line: ``ledger chain <chain> at seq <broken_at>: <reason>`` (or the state)."""
        if self.chain == "broken":
            return f"ledger chain broken at seq {self.broken_at}: {self.reason}"
        return f"ledger chain {self.chain} ({self.entries} entries)"


class _Walk:
    """State of one streamed walk over the ledger lines.

    ``feed`` takes the fast path (``_entry.match_line``: no JSON parse, one SHA-256)
    for every line that is certainly a well-formed entry continuing an intact chain; any
    other line, and any line whose checks fail, goes through ``line``, the reference
    implementation of the anchor's walk, which decides the verdict and the reason.
    """

    def __init__(self, head: Head | None) -> None:
        self.head = head
        self.entries = 0
        self.expect_seq = 1
        # The hash the next entry must name as prev: ASCII bytes (any other value, as read
        # from a malformed line past a break, never matches).
        self.prev: object = GENESIS.encode()
        self.broken_at: int | None = None
        self.reason: str | None = None
        self.trusted: dict[str, str] = {}
        self.untrusted: dict[str, str] = {}
        # The last entry before any break, not yet committed to `trusted`: a prev mismatch on
        # the next line demotes it (positional trust, research/mnemo.md section 2).
        self.held: tuple[str, str] | None = None
        self.last_seq = 0

    def feed(self, lines: list[bytes]) -> None:
        """Walk a batch of raw lines (newlines and surrounding whitespace allowed).

        Until the first break, the loop keeps the walk's state in local variables and checks
        a line in either usual shape (``_FAST_LINE``, ``_FAST_ANCHOR``, matched on the raw
        bytes) inline; the state is stored back before any other line goes to ``_feed_one``
        (whitespace around the line, anything that fails a check) and at the end of the
        batch.
        """
        rest = iter(lines)
        if self.broken_at is None:
            head_seq = self.head.seq if self.head is not None else -1
            head_hash = self.head.hash.encode() if self.head is not None else b""
            trusted = self.trusted
            sha256, same = hashlib.sha256, hmac.compare_digest
            fullmatch, anchor = _FAST_LINE.fullmatch, _FAST_ANCHOR.fullmatch
            literal_ok = ts_literal_ok
            preimage = _PREIMAGE
            cut0, cut1 = HASH_SPAN
            entries, expect, prev, last = self.entries, self.expect_seq, self.prev, self.last_seq
            held_mid, held_cs = self.held or (None, "")
            for raw in rest:
                m = fullmatch(raw)
                if m is not None:
                    cs_b, claimed, mid_b, op, prev_b, seq_b, ts = m.groups()
                    pre = raw[:cut0] + raw[cut1:]
                else:
                    m = anchor(raw)
                    if m is not None:
                        seq_b, ts, op, mid_b, cs_b, prev_b, claimed = m.groups()
                        pre = preimage % (cs_b, mid_b, op, prev_b, seq_b, ts)
                if m is not None and type(prev) is bytes:
                    seq = int(seq_b)
                    if (
                        seq == expect
                        and same(prev_b, prev)
                        and literal_ok(ts)
                        and same(claimed, sha256(pre).hexdigest().encode())
                        and (seq != head_seq or same(claimed, head_hash))
                    ):
                        try:
                            mid = mid_b.decode()
                        except UnicodeDecodeError:
                            pass
                        else:
                            cs = cs_b.decode()
                            entries += 1
                            if held_mid is not None:
                                trusted[held_mid] = held_cs
                            held_mid, held_cs = mid, _Tombstone(cs) if op == b"forget" else cs
                            last, expect, prev = seq, seq + 1, claimed
                            continue
                self._keep(entries, expect, prev, last, held_mid, held_cs)
                self._feed_one(raw)
                if self.broken_at is not None:
                    break
                entries, expect, prev, last = (
                    self.entries,
                    self.expect_seq,
                    self.prev,
                    self.last_seq,
                )
                held_mid, held_cs = self.held or (None, "")
            else:
                self._keep(entries, expect, prev, last, held_mid, held_cs)
        for raw in rest:
            self._feed_one(raw)

    def _keep(
        self,
        entries: int,
        expect: int,
        prev: object,
        last: int,
        held_mid: str | None,
        held_cs: str,
    ) -> None:
        """Store the state ``feed`` keeps in local variables back into the walk."""
        self.entries, self.expect_seq, self.prev, self.last_seq = entries, expect, prev, last
        self.held = None if held_mid is None else (held_mid, held_cs)

    def _feed_one(self, raw: bytes) -> None:
        """One raw line: either shape through ``match_line``, else the general path."""
        head_seq = self.head.seq if self.head is not None else -1
        head_hash = self.head.hash.encode() if self.head is not None else b""
        line = raw.strip()
        if not line:
            return
        found = match_line(line)
        if found is not None:
            seq, mid, cs, prev_b, claimed, pre, op = found
            if op == "forget":
                cs = _Tombstone(cs)
            if self.broken_at is not None:  # past the first break: bookkeeping only
                self.entries += 1
                self.untrusted[mid] = cs
                self.expect_seq = seq + 1
                self.prev = claimed
                return
            prev = self.prev
            if (
                seq == self.expect_seq
                and type(prev) is bytes
                and hmac.compare_digest(prev_b, prev)
                and hmac.compare_digest(claimed, hashlib.sha256(pre).hexdigest().encode())
                and (seq != head_seq or hmac.compare_digest(claimed, head_hash))
            ):
                self.entries += 1
                if self.held is not None:
                    self.trusted[self.held[0]] = self.held[1]
                self.held = (mid, cs)
                self.last_seq = seq
                self.expect_seq = seq + 1
                self.prev = claimed
                return
        self.line(line)

    def _break(self, at: int, reason: str, demote_prev: bool) -> None:
        self.broken_at = at
        self.reason = reason
        if self.held is not None:
            target = self.untrusted if demote_prev else self.trusted
            target[self.held[0]] = self.held[1]
            self.held = None

    def _advance(self, obj: dict[str, Any]) -> None:
        seq = obj.get("seq")
        if type(seq) is int:
            self.expect_seq = seq + 1
        claimed = obj.get("hash")
        self.prev = claimed.encode("utf-8", "surrogatepass") if type(claimed) is str else None

    def _untrusted(self, obj: dict[str, Any]) -> None:
        mid, cs = obj.get("memory_id"), obj.get("content_sha256")
        if type(mid) is str and type(cs) is str:
            self.untrusted[mid] = _claim(obj.get("op"), cs)

    def line(self, stripped: bytes) -> None:
        """The general path for one non-blank stripped line: strict parse, both hash forms."""
        self.entries += 1
        try:
            obj: dict[str, Any] | None = parse_line(stripped)
        except LedgerFormatError:
            obj = None
        if self.broken_at is not None:  # past the first break: bookkeeping only
            if obj is not None:
                self._untrusted(obj)
                self._advance(obj)
            return
        if obj is None:
            self._break(self.expect_seq, REASON_UNPARSEABLE, False)
            return
        problem = schema_problem(obj)
        seq = obj.get("seq")
        if problem is not None:
            self._break(self.expect_seq, problem, False)
        elif seq != self.expect_seq:
            self._break(
                self.expect_seq, f"sequence gap: expected {self.expect_seq}, found {seq}", False
            )
        elif not (
            type(self.prev) is bytes and hmac.compare_digest(obj["prev"].encode(), self.prev)
        ):
            self._break(seq, REASON_PREV, True)
        elif not hash_matches(obj["hash"], {k: v for k, v in obj.items() if k != "hash"}):
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
            self.held = (obj["memory_id"], _claim(obj["op"], obj["content_sha256"]))
            self.last_seq = obj["seq"]
        self._advance(obj)

    def finish(self, head_error: str | None) -> None:
        if self.broken_at is None and head_error is not None:
            self._break(self.last_seq + 1, head_error, False)
        elif self.broken_at is None and self.head is not None and self.head.seq > self.last_seq:
            self._break(self.last_seq + 1, head_ahead_reason(self.head.seq, self.last_seq), False)
        if self.held is not None:
            self.trusted[self.held[0]] = self.held[1]
            self.held = None


def _matches(claimed: str, testimony: str | Collection[str]) -> bool:
    if len(claimed) != 64 or not claimed.isascii():
        return False
    if isinstance(testimony, str):
        return testimony.isascii() and hmac.compare_digest(claimed, testimony)
    if not isinstance(testimony, Collection):
        return False  # not a digest: never matches
    return any(isinstance(t, str) and _matches(claimed, t) for t in testimony)


def head_ahead_reason(head_seq: int, last_seq: int) -> str:
    """Why a chain whose ``ledger.head`` records seq ``head_seq`` but whose ledger ends at
    ``last_seq`` (1-based; 0 for none) is broken at ``last_seq + 1``: a rollback. The one
    wording ``verify`` and the proof functions (``ledger.proofs``) give."""
    return (
        f"ledger.head records a later entry (seq {head_seq}) than the ledger holds"
        f" (last seq {last_seq})"
    )


def _read_head(ledger: LedgerStore | str | os.PathLike[str]) -> tuple[Head | None, str | None]:
    try:
        return as_store(ledger).read_head(), None
    except LedgerFormatError as exc:
        return None, str(exc)


def verify_ledger(
    path: LedgerStore | str | os.PathLike[str],
    testimony: Testimony | Callable[[], Testimony],
    *,
    testimony_under_lock: bool = False,
    progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Walk the ledger and judge every record (research/mnemo.md section 2; DESIGN section 4).

    Args:
        path: the ``ledger.jsonl`` file (a missing file is an empty ledger; ``ledger.head``
            beside it is read when present), or any
            :class:`~merkle_memory.ledger.storage.LedgerStore`.
        testimony: memory id -> current testimony digest(s) of each record file that exists
            (see ``Testimony``); ids of unparseable files map to ``""`` so they never match.
            Or a function returning that mapping: it is then called after ``ledger.head`` is
            read and the ledger's size noted (under a brief shared lock,
            ``LedgerFile.shared_lock``, so no append is half-written at that point), and only
            that many bytes of the ledger are walked. Records are durable before their lines,
            so a writer saving while verify runs can make a record read ``unsealed`` (its
            line came after the snapshot) but never ``missing`` (DESIGN section 4 append
            order). Use this form for live stores.
        testimony_under_lock: with a function, call it while the shared lock is still held.
            For stores whose writers write a record and append its line under the ledger's
            exclusive lock (``Tenant.save``), the scan then sees exactly the records of the
            snapshot, so a re-save racing verify cannot read ``altered`` either; writers wait
            for the scan. Never use it while this process holds the ledger lock through
            another descriptor (``flock`` would wait for itself), nor when the function takes
            a lock that writers hold while appending (lock order).
        progress: optional ``progress(phase, done, total)`` callback (``merkle_memory``'s
            progress protocol): phase ``"ledger"``, in bytes of the ledger walked, called
            after every block of 1 MiB and once at the end.

    Returns:
        A ``VerifyReport``. A trusted entry is one before the first break (at a prev mismatch
        the entry before the break is demoted too); the last entry per id wins on each side;
        a trusted verdict is never overruled by an untrusted entry. Without a function, the
        walk covers the bytes the ledger held when it was opened. Bytes after the last
        newline that are not a complete JSON object are a torn tail (``torn_tail``), not an
        entry and not a break.

    Raises:
        LedgerError: ``path`` is neither a store nor a path, or ``testimony`` (or what it
            returns) is not a mapping.
        OSError: the ledger exists but cannot be read.
    """
    store = as_store(path, "a ledger path")
    if not (callable(testimony) or isinstance(testimony, Mapping)):
        raise LedgerError(f"testimony is a mapping or a function, not {type(testimony).__name__}")
    with store.reader() as file:
        limit: int | None = None
        if callable(testimony) and file is not None:
            # A consistent point between two appends: writers hold the exclusive lock from
            # their line to their head update, so under the shared lock no line is half-written.
            with file.shared_lock():
                head, head_error = _read_head(store)
                limit = file.size()
                if testimony_under_lock:
                    testimony = testimony()
        else:
            head, head_error = _read_head(store)
        if callable(testimony):
            testimony = testimony()
            if not isinstance(testimony, Mapping):
                raise LedgerError(f"testimony() returned {type(testimony).__name__}, not a mapping")
        walk = _Walk(head)
        torn: tuple[int, int] | None = None
        if file is not None:
            end = file.size() if limit is None else limit
            offset, fragment = split_fragment(file, end)
            if fragment and not is_complete_object(fragment):
                # What a crash mid-append leaves: the next append quarantines exactly this.
                torn, end = (offset, len(fragment)), offset
            done = 0
            for batch in iter_line_blocks(file, 0, end, _BLOCK):
                walk.feed(batch)
                if progress is not None:
                    done += sum(len(line) + 1 for line in batch)
                    progress("ledger", min(done, end), end)
            if progress is not None:
                progress("ledger", end, end)
    walk.finish(head_error)
    report = _judge(walk, testimony)
    return report if torn is None else dataclasses.replace(report, torn_tail=torn)


def _judge(walk: _Walk, testimony: Testimony) -> VerifyReport:
    """The verdicts of a finished walk against the records' testimony.

    An id whose latest entry on its side is a ``forget`` is judged by absence: no record
    file, or one whose testimony includes the tombstone's digest (a forget under way), is
    ``forgotten`` (``disputed`` when the entry is untrusted); any other record file is
    ``reappeared``.
    """
    sealed = 0
    altered: list[str] = []
    missing: list[str] = []
    disputed: list[str] = []
    forgotten: list[str] = []
    reappeared: list[str] = []
    for mid, claimed in walk.trusted.items():
        if type(claimed) is _Tombstone:
            if mid not in testimony or _matches(claimed, testimony[mid]):
                forgotten.append(mid)
            else:
                reappeared.append(mid)
        elif mid not in testimony:
            missing.append(mid)
        elif _matches(claimed, testimony[mid]):
            sealed += 1
        else:
            altered.append(mid)
    for mid, claimed in walk.untrusted.items():
        if mid in walk.trusted:
            continue  # a trusted verdict stands
        if type(claimed) is _Tombstone:
            if mid not in testimony or _matches(claimed, testimony[mid]):
                disputed.append(mid)
            else:
                reappeared.append(mid)
        elif mid not in testimony:
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
        forgotten=tuple(sorted(forgotten)),
        reappeared=tuple(sorted(reappeared)),
    )
