"""Ledger entries: the line format, both hash forms, strict and fast line parsing (private).

DESIGN section 4. An entry is ``{"seq", "ts", "op", "memory_id", "content_sha256", "prev",
"hash"}``; ``hash = digest(entry without "hash")``. This library writes each line as the RFC
8785 bytes of the entry (hash included) and a newline. When reading, a hash is accepted if it
matches either RFC 8785 or the anchor form (mnemo-cortex's ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``); a value outside the RFC 8785 domain is compared
in the anchor form only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import canonical
from .._json import HEX64, strict_decode
from ..errors import CanonicalizationError, LedgerError, LedgerFormatError

__all__ = [
    "ANCHOR_LINE",
    "CANONICAL_LINE",
    "ENTRY_KEYS",
    "GENESIS",
    "HASH_SPAN",
    "OPS",
    "Entry",
    "anchor_digest",
    "as_path",
    "build_entries",
    "build_one",
    "entry_hash",
    "fast_fields",
    "hash_matches",
    "leaf_line",
    "match_line",
    "number_text",
    "parse_line",
    "schema_problem",
    "shaped_escaped_memory_id",
    "shaped_memory_id",
    "ts_literal_ok",
]

GENESIS: Final = "0" * 64
"""``prev`` of the first entry: 64 zeros."""

OPS: Final = frozenset({"save", "adopt", "forget"})
"""The operations an entry may record: ``save`` and ``adopt`` seal a record's testimony;
``forget`` seals a tombstone (the record's file was removed on purpose, ``Tenant.forget``)."""

ENTRY_KEYS: Final = frozenset({"seq", "ts", "op", "memory_id", "content_sha256", "prev", "hash"})
"""Exactly the keys of a well-formed entry line."""

MAX_MEMORY_ID_CHARS: Final = 1024
"""Longest ``memory_id`` this library writes."""

_ANCHOR_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
)
_SIMPLE_ID: Final = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]+')


def number_text(value: float) -> str:
    """RFC 8785 text of an ``int`` or finite ``float`` (fast for the usual ranges)."""
    if type(value) is int:
        return str(value)
    if value.is_integer():
        if abs(value) <= 2**53:
            return str(int(value))
    elif 1e-4 <= abs(value) < 1e16:
        return repr(value)
    return canonical.format_number(value)


def anchor_digest(value: Any) -> str:
    """SHA-256 of the anchor's canonical form of ``value`` (mnemo-cortex compatibility).

    Returns:
        64-char lowercase hex of ``json.dumps(value, sort_keys=True, separators=(",", ":"),
        ensure_ascii=False)`` encoded as UTF-8.

    Raises:
        LedgerFormatError: ``value`` has no JSON form (e.g. a set).
    """
    try:
        text = _ANCHOR_ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise LedgerFormatError(f"value has no JSON form: {exc}") from exc
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def hash_matches(claimed: Any, value: Any) -> bool:
    """Whether ``claimed`` is the digest of ``value`` in the RFC 8785 or the anchor form.

    Args:
        claimed: the digest read from a file (anything; only a 64-char lowercase hex ``str``
            can match).
        value: the parsed JSON value that was hashed.

    Returns:
        ``True`` if either form matches (compared with ``hmac.compare_digest``).
    """
    if type(claimed) is not str or HEX64.fullmatch(claimed) is None:
        return False
    try:
        if hmac.compare_digest(claimed, anchor_digest(value)):
            return True
    except LedgerFormatError:
        pass
    try:
        return hmac.compare_digest(claimed, canonical.digest(value))
    except CanonicalizationError:
        return False


def as_path(
    value: Any, what: str = "a ledger path", error: type[LedgerError] = LedgerError
) -> Path:
    """``Path(value)`` for a ``str`` or ``os.PathLike`` naming something; else ``error``.

    Args:
        value: the argument received.
        what: how to name it in the message (e.g. ``"a tenant folder"``).
        error: the ``LedgerError`` subclass to raise.

    Raises:
        LedgerError: (``error``) not a ``str`` or path-like, or an empty path.
    """
    if isinstance(value, str | os.PathLike):
        try:
            text = os.fspath(value)
        except TypeError:  # a broken __fspath__
            text = None
        if isinstance(text, str) and text:  # not a bytes path, not ""
            return Path(text)
    raise error(f"{what} is a non-empty str or path, not {type(value).__name__} {value!r:.80}")


def entry_hash(body: dict[str, Any]) -> str:
    """RFC 8785 digest of an entry without its ``hash`` key (the hash this library writes).

    Args:
        body: an entry dict; a ``hash`` key, if present, is left out.

    Returns:
        64-char lowercase hex.

    Raises:
        CanonicalizationError: a value outside the RFC 8785 domain.
        LedgerFormatError: ``body`` is not a dict.
    """
    if not isinstance(body, dict):
        raise LedgerFormatError(f"an entry is a dict, not {type(body).__name__}")
    return canonical.digest({k: v for k, v in body.items() if k != "hash"})


def parse_line(line: bytes) -> dict[str, Any]:
    """Parse one ledger line (without its newline) as a strict JSON object.

    The stdlib ``json`` parser (the anchor's), but invalid UTF-8, a duplicate key or a
    NaN/Infinity literal makes the line unparseable (DESIGN section 4).

    Raises:
        LedgerFormatError: not UTF-8, not JSON, not an object, duplicate key, NaN/Infinity.
    """
    try:
        text = line.decode("utf-8")
        obj = strict_decode(text)
    except (ValueError, RecursionError) as exc:
        raise LedgerFormatError(f"unparseable line: {exc}") from None
    if type(obj) is not dict:
        raise LedgerFormatError("unparseable line: not a JSON object")
    return obj


def schema_problem(obj: dict[str, Any]) -> str | None:
    """Say what makes a parsed line not a well-formed entry, or ``None`` if it is one.

    Well-formed: exactly the seven keys; ``seq`` an ``int`` (not ``bool``) >= 1; ``ts`` a finite
    number (not ``bool``); ``op`` one of ``OPS`` (``"save"``, ``"adopt"``, ``"forget"``);
    ``memory_id`` a non-empty ``str``;
    ``content_sha256``, ``prev`` and ``hash`` 64-char lowercase hex.
    """
    if obj.keys() != ENTRY_KEYS:
        extra = sorted(obj.keys() - ENTRY_KEYS)
        lacking = sorted(ENTRY_KEYS - obj.keys())
        parts = []
        if lacking:
            parts.append("missing " + ", ".join(lacking))
        if extra:
            parts.append("unexpected " + ", ".join(repr(k) for k in extra[:4]))
        return "malformed entry: " + "; ".join(parts)
    seq = obj["seq"]
    if type(seq) is not int or seq < 1:
        return "malformed entry: seq is not a positive integer"
    ts = obj["ts"]
    if type(ts) is float:
        if not math.isfinite(ts):
            return "malformed entry: ts is not finite"
    elif type(ts) is not int:
        return "malformed entry: ts is not a number"
    if obj["op"] not in OPS:
        return "malformed entry: op is not save, adopt or forget"
    mid = obj["memory_id"]
    if type(mid) is not str or not mid:
        return "malformed entry: memory_id is not a non-empty string"
    for key in ("content_sha256", "prev", "hash"):
        value = obj[key]
        if type(value) is not str or HEX64.fullmatch(value) is None:
            return f"malformed entry: {key} is not 64-char lowercase hex"
    return None


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger entry (DESIGN section 4).

    Attributes:
        seq: 1-based position in the chain.
        ts: epoch seconds, rounded to microseconds.
        op: ``"save"`` or ``"adopt"`` (a record's testimony), or ``"forget"`` (a tombstone).
        memory_id: the id of the sealed record.
        content_sha256: the record's testimony digest (for ``forget``: the tombstone's
            digest, ``ledger.tombstones``), 64-char lowercase hex.
        prev: ``hash`` of the entry before, or ``GENESIS`` (64 zeros) for seq 1.
        hash: digest of the entry without ``hash``, 64-char lowercase hex.
    """

    seq: int
    ts: float
    op: str
    memory_id: str
    content_sha256: str
    prev: str
    hash: str

    def body(self) -> dict[str, Any]:
        """The entry as a dict without ``hash`` (the hash preimage's value)."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "op": self.op,
            "memory_id": self.memory_id,
            "content_sha256": self.content_sha256,
            "prev": self.prev,
        }

    def to_dict(self) -> dict[str, Any]:
        """The entry as a JSON object with all seven keys, ``hash`` included."""
        out = self.body()
        out["hash"] = self.hash
        return out

    def line(self) -> bytes:
        """``canonical.dumps(self.to_dict())``: the line this library writes, no newline.

        These exact bytes are also the RFC 6962 leaf data of the entry (DESIGN section 6).
        """
        if _SIMPLE_ID.fullmatch(self.memory_id) is None:
            return canonical.dumps(self.to_dict())
        return (
            f'{{"content_sha256":"{self.content_sha256}","hash":"{self.hash}",'
            f'"memory_id":"{self.memory_id}","op":"{self.op}","prev":"{self.prev}",'
            f'"seq":{self.seq},"ts":{number_text(self.ts)}}}'
        ).encode()

    @classmethod
    def create(
        cls, seq: int, ts: float, op: str, memory_id: str, content_sha256: str, prev: str
    ) -> Entry:
        """Build a new entry and compute its hash (RFC 8785 form).

        Args:
            seq: 1-based seq.
            ts: epoch seconds; rounded here to microseconds.
            op: one of ``OPS`` (``"save"``, ``"adopt"``, ``"forget"``).
            memory_id: non-empty id, at most ``MAX_MEMORY_ID_CHARS`` characters, no NUL.
            content_sha256: 64-char lowercase hex testimony digest.
            prev: 64-char lowercase hex hash of the entry before (``GENESIS`` for seq 1).

        Raises:
            LedgerFormatError: any argument outside those shapes, or not canonicalizable.
        """
        if type(ts) not in (int, float) or not math.isfinite(ts):
            raise LedgerFormatError(f"ts must be finite epoch seconds, not {ts!r}")
        if type(memory_id) is not str or not memory_id or "\x00" in memory_id:
            raise LedgerFormatError(f"memory_id must be a non-empty string, not {memory_id!r}")
        if len(memory_id) > MAX_MEMORY_ID_CHARS:
            raise LedgerFormatError(f"memory_id longer than {MAX_MEMORY_ID_CHARS} characters")
        stamp = round(float(ts), 6)
        body = {
            "seq": seq,
            "ts": stamp,
            "op": op,
            "memory_id": memory_id,
            "content_sha256": content_sha256,
            "prev": prev,
            "hash": GENESIS,
        }
        problem = schema_problem(body)
        if problem is not None:
            raise LedgerFormatError(problem.replace("malformed entry: ", "bad entry: "))
        if seq > canonical.MAX_SAFE_INTEGER:
            raise LedgerFormatError(f"seq {seq} is beyond 2**53 - 1")
        if _SIMPLE_ID.fullmatch(memory_id) is not None:
            pre = (
                f'{{"content_sha256":"{content_sha256}","memory_id":"{memory_id}",'
                f'"op":"{op}","prev":"{prev}","seq":{seq},"ts":{number_text(stamp)}}}'
            )
            digest = hashlib.sha256(pre.encode()).hexdigest()
        else:
            try:
                digest = entry_hash(body)
            except CanonicalizationError as exc:
                raise LedgerFormatError(f"entry cannot be canonicalized: {exc}") from exc
        return cls(seq, stamp, op, memory_id, content_sha256, prev, digest)

    @classmethod
    def from_dict(cls, data: Any, *, check_hash: bool = True) -> Entry:
        """Validate a parsed entry object (either hash form) and build an ``Entry``.

        Args:
            data: the parsed JSON object of one line.
            check_hash: also require ``hash`` to match the entry (RFC 8785 or anchor form).

        Raises:
            LedgerFormatError: not a dict, wrong keys or types, or (with ``check_hash``) a hash
                that matches neither form.
        """
        if type(data) is not dict:
            raise LedgerFormatError("entry is not a JSON object")
        problem = schema_problem(data)
        if problem is not None:
            raise LedgerFormatError(problem)
        if check_hash and not hash_matches(
            data["hash"], {k: v for k, v in data.items() if k != "hash"}
        ):
            raise LedgerFormatError(f"entry hash does not match its contents (seq {data['seq']})")
        try:
            ts = float(data["ts"])
        except OverflowError as exc:
            raise LedgerFormatError("malformed entry: ts out of range") from exc
        return cls(
            data["seq"],
            ts,
            data["op"],
            data["memory_id"],
            data["content_sha256"],
            data["prev"],
            data["hash"],
        )


_ENTRY_SLOTS: Final = tuple(
    Entry.__dict__[name].__set__
    for name in ("seq", "ts", "op", "memory_id", "content_sha256", "prev", "hash")
)


def build_entries(
    pairs: list[tuple[str, str]], op: str, ts: float, seq: int, prev: str
) -> tuple[list[Entry], bytes]:
    """The entries that seal ``pairs`` after entry ``seq`` (hash ``prev``), and their lines.

    Exactly ``Entry.create`` for each pair in turn (seq ``seq + 1`` on, each ``prev`` the hash
    before), with the work shared by the whole batch done once (``ts`` rounded and formatted,
    ``op`` checked) and the usual line (an id needing no escape) formatted directly.

    Args:
        pairs: ``(memory_id, content_sha256)`` pairs.
        op: ``"save"`` or ``"adopt"``.
        ts: epoch seconds, rounded here to microseconds.
        seq: 1-based seq of the entry before (0 for none).
        prev: its hash (``GENESIS`` for none), 64-char lowercase hex.

    Returns:
        ``(entries, lines)``: ``lines`` is every ``entry.line()`` followed by ``\n``.

    Raises:
        LedgerFormatError: what ``Entry.create`` raises for the first bad pair (nothing is
            returned).
    """
    if type(ts) not in (int, float) or not math.isfinite(ts):
        raise LedgerFormatError(f"ts must be finite epoch seconds, not {ts!r}")
    if op not in OPS or HEX64.fullmatch(prev) is None:
        return _build_slowly(pairs, op, ts, seq, prev)
    if seq + len(pairs) > canonical.MAX_SAFE_INTEGER:
        raise LedgerFormatError(f"seq {seq + len(pairs)} is beyond 2**53 - 1")
    stamp = round(float(ts), 6)
    ts_text = number_text(stamp)
    simple, hex64, sha256 = _SIMPLE_ID.fullmatch, HEX64.fullmatch, hashlib.sha256
    new, fields = object.__new__, _ENTRY_SLOTS
    set_seq, set_ts, set_op, set_mid, set_cs, set_prev, set_hash = fields
    entries: list[Entry] = []
    lines: list[str] = []
    for memory_id, content_sha256 in pairs:
        seq += 1
        if (
            type(memory_id) is not str
            or len(memory_id) > MAX_MEMORY_ID_CHARS
            or simple(memory_id) is None
            or type(content_sha256) is not str
            or hex64(content_sha256) is None
        ):
            entry = Entry.create(seq, stamp, op, memory_id, content_sha256, prev)
            lines.append(entry.line().decode() + "\n")
            prev = entry.hash
        else:
            tail = (
                f'"memory_id":"{memory_id}","op":"{op}","prev":"{prev}","seq":{seq},'
                f'"ts":{ts_text}}}'
            )
            digest = sha256(f'{{"content_sha256":"{content_sha256}",{tail}'.encode()).hexdigest()
            lines.append(f'{{"content_sha256":"{content_sha256}","hash":"{digest}",{tail}\n')
            # Entry(...) without the frozen dataclass's __init__ (the same seven fields, set
            # through the slots' descriptors): a third of the cost per entry.
            entry = new(Entry)
            set_seq(entry, seq)
            set_ts(entry, stamp)
            set_op(entry, op)
            set_mid(entry, memory_id)
            set_cs(entry, content_sha256)
            set_prev(entry, prev)
            set_hash(entry, digest)
            prev = digest
        entries.append(entry)
    return entries, "".join(lines).encode()


_HEX_DIGITS: Final = "0123456789abcdef"
_MAX_SEQ: Final = canonical.MAX_SAFE_INTEGER


def usual_stamp(memory_id: Any, content_sha256: Any, op: Any, ts: Any) -> tuple[float, str] | None:
    """``(stamp, ts_text)``, ``ts`` rounded to microseconds and its RFC 8785 text, when the
    arguments make the usual entry (see ``build_one``, ``seq`` aside); ``None`` otherwise."""
    if (
        type(memory_id) is not str
        or type(content_sha256) is not str
        or type(ts) is not float
        or type(op) is not str
        or len(content_sha256) != 64
        or content_sha256.strip(_HEX_DIGITS)
        or not 0 < len(memory_id) <= MAX_MEMORY_ID_CHARS
        or op not in OPS
        or ts - ts != 0.0  # inf or nan
    ):
        return None
    if (
        not (
            memory_id.isascii()
            and memory_id.isprintable()
            and '"' not in memory_id
            and "\\" not in memory_id
        )
        and _SIMPLE_ID.fullmatch(memory_id) is None
    ):
        return None
    stamp = round(ts, 6)
    ts_text = repr(stamp) if 1e-4 <= abs(stamp) < 1e16 and not stamp.is_integer() else None
    return stamp, number_text(stamp) if ts_text is None else ts_text


def build_one(
    memory_id: Any,
    content_sha256: Any,
    op: Any,
    ts: Any,
    seq: int,
    prev: str,
    usual: tuple[float, str] | None = None,
) -> tuple[Entry, bytes] | None:
    """``build_entries([(memory_id, content_sha256)], op, ts, seq, prev)`` for the usual
    single entry, with no regular expression on the usual inputs; ``None`` for anything
    else (the caller then takes ``build_entries``, which builds it or raises).

    The usual entry: ``memory_id`` a ``str`` of 1 to ``MAX_MEMORY_ID_CHARS`` characters
    that needs no escape in JSON, ``content_sha256`` a ``str`` of 64 lowercase hex digits,
    ``op`` one of ``OPS``, ``ts`` a finite ``float``, ``seq + 1`` at most 2**53 - 1.

    Args:
        memory_id: the record's id.
        content_sha256: its testimony digest.
        op: the operation.
        ts: epoch seconds, rounded here to microseconds.
        seq: 1-based seq of the entry before (0 for none).
        prev: its hash (``GENESIS`` for none), 64-char lowercase hex, trusted (the caller's
            own last entry).
        usual: what ``usual_stamp`` gave for these same arguments, when the caller has it
            (trusted: the checks are not made again).

    Returns:
        ``(entry, line)``: ``line`` is ``entry.line()`` followed by ``\n``, byte for byte
        what ``build_entries`` returns for the same arguments; or ``None``.
    """
    if usual is None:
        usual = usual_stamp(memory_id, content_sha256, op, ts)
    if usual is None or seq >= _MAX_SEQ:
        return None
    stamp, ts_text = usual
    seq += 1
    tail = f'"memory_id":"{memory_id}","op":"{op}","prev":"{prev}","seq":{seq},"ts":{ts_text}}}'
    digest = hashlib.sha256(f'{{"content_sha256":"{content_sha256}",{tail}'.encode()).hexdigest()
    entry = object.__new__(Entry)
    set_seq, set_ts, set_op, set_mid, set_cs, set_prev, set_hash = _ENTRY_SLOTS
    set_seq(entry, seq)
    set_ts(entry, stamp)
    set_op(entry, op)
    set_mid(entry, memory_id)
    set_cs(entry, content_sha256)
    set_prev(entry, prev)
    set_hash(entry, digest)
    return entry, f'{{"content_sha256":"{content_sha256}","hash":"{digest}",{tail}\n'.encode()


def _build_slowly(
    pairs: list[tuple[str, str]], op: str, ts: float, seq: int, prev: str
) -> tuple[list[Entry], bytes]:
    """``build_entries`` through ``Entry.create`` alone (it raises on the bad argument)."""
    entries = []
    for memory_id, content_sha256 in pairs:
        seq += 1
        entries.append(Entry.create(seq, ts, op, memory_id, content_sha256, prev))
        prev = entries[-1].hash
    return entries, b"".join(entry.line() + b"\n" for entry in entries)


# --- Reading well-formed lines without a JSON parser: the fast path of verify and sidecar sync
#
# Two line shapes cover nearly every ledger (DESIGN section 4):
#
# - this library's: ``canonical.dumps(entry)``, keys sorted, no spaces (``CANONICAL_LINE``);
# - the anchor's: ``json.dumps(entry, ensure_ascii=False)``, keys in insertion order ``seq, ts,
#   op, memory_id, content_sha256, prev, hash`` and default separators (``ANCHOR_LINE``;
#   research/mnemo.md section 1).
#
# ``match_line`` recognises either shape when the ``memory_id`` needs no escape and ``ts`` is
# written without an exponent, exactly as the anchor's encoder writes that value (``repr`` of
# the float, or the integer's digits). Such a line parses (strict: no duplicate key, no NaN) to
# a well-formed entry, and its hash preimage in the anchor form (``json.dumps(body,
# sort_keys=True, separators=(",", ":"), ensure_ascii=False)``) is a fixed rearrangement of its
# bytes, so the entry hash is checked with one SHA-256 and no parse or encode. A line that does
# not match is *not* judged here: the caller takes the general path (strict parse, both hash
# forms), which is the reference; this part only accelerates lines that are certainly
# well-formed.

_MID: Final = rb'"([^"\\\x00-\x1f]+)"'
_HEX: Final = rb'"([0-9a-f]{64})"'
_SEQ: Final = rb"([1-9][0-9]{0,15})"
_TS: Final = rb"(-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,17})?)"


def _canonical_shape(mid: bytes) -> bytes:
    """The pattern of a line as this library writes it, ``mid`` matching the id's string."""
    return (
        rb'\{"content_sha256":' + _HEX + rb',"hash":' + _HEX + rb',"memory_id":' + mid
        + rb',"op":"(save|adopt|forget)","prev":' + _HEX + rb',"seq":' + _SEQ + rb',"ts":' + _TS
        + rb"\}"
    )  # fmt: skip


def _anchor_shape(mid: bytes) -> bytes:
    """The pattern of a line as the anchor writes it, ``mid`` matching the id's string."""
    return (
        rb'\{"seq": ' + _SEQ + rb', "ts": ' + _TS + rb', "op": "(save|adopt|forget)", '
        + rb'"memory_id": ' + mid + rb', "content_sha256": ' + _HEX + rb', "prev": ' + _HEX
        + rb', "hash": ' + _HEX + rb"\}"
    )  # fmt: skip


CANONICAL_LINE: Final = re.compile(_canonical_shape(_MID))
"""A line as this library writes it (groups: content_sha256, hash, memory_id, op, prev, seq,
ts)."""

ANCHOR_LINE: Final = re.compile(_anchor_shape(_MID))
"""A line as the anchor writes it (groups: seq, ts, op, memory_id, content_sha256, prev,
hash)."""


def shaped_memory_id(line: bytes) -> bytes | None:
    """The ``memory_id`` bytes of a line in one of the two fixed shapes, without a parser.

    A line that ``CANONICAL_LINE`` or ``ANCHOR_LINE`` matches whole is a JSON object with
    exactly one ``memory_id`` key, whose value is written between quotes with no escape (no
    ``"``, ``\\`` or control character). If the line parses (its bytes are UTF-8), that value
    is these bytes decoded as UTF-8; if not, the line is no entry at all. So the line is an
    entry of an id only if these bytes are ``canonical.dumps(id)`` without its quotes (an id
    needing an escape is never written in these shapes).

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        The bytes between the quotes of the ``memory_id`` value, or ``None`` when the line is
        in neither shape (read it with ``parse_line`` then).
    """
    m = CANONICAL_LINE.fullmatch(line)
    if m is not None:
        return m.group(3)
    m = ANCHOR_LINE.fullmatch(line)
    return None if m is None else m.group(4)


_MID_ESCAPED: Final = rb'"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})+)"'
_CANONICAL_ESCAPED: Final = re.compile(_canonical_shape(_MID_ESCAPED))
_ANCHOR_ESCAPED: Final = re.compile(_anchor_shape(_MID_ESCAPED))


def shaped_escaped_memory_id(line: bytes) -> str | None:
    """The ``memory_id`` of a line in one of the two fixed shapes whose id is written with
    JSON escapes (``\\"``, ``\\\\``, ``\\u00e9``...), decoded, without parsing the line.

    The shapes are ``CANONICAL_LINE`` and ``ANCHOR_LINE`` with the id's string allowed any
    JSON escape (an id holding ``"`` or ``\\`` in this library's lines; any non-ASCII
    character in those of a writer that escapes it). A line matched whole is a JSON object with
    exactly one ``memory_id`` key whose value is that string token; if the line parses at all,
    the value is the token decoded. So a line whose decoded token differs from an id is no
    entry of that id, parsed or not.

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        The decoded ``memory_id`` (it may hold a lone surrogate, which ``parse_line`` would
        refuse), or ``None`` when the line is in neither shape or its token is not UTF-8
        (read it with ``parse_line`` then).
    """
    m = _CANONICAL_ESCAPED.fullmatch(line)
    token = m.group(3) if m is not None else None
    if token is None:
        m = _ANCHOR_ESCAPED.fullmatch(line)
        if m is None:
            return None
        token = m.group(4)
    try:
        value = json.loads(b'"' + token + b'"')
    except ValueError:  # not UTF-8
        return None
    return value if type(value) is str else None


HASH_SPAN: Final = (85, 159)
"""Byte span of ``"hash":"<64 hex>",`` in a ``CANONICAL_LINE``; the rest is the preimage."""

_CUT0, _CUT1 = HASH_SPAN
_LEAF: Final = (
    b'{"content_sha256":"%s","hash":"%s","memory_id":"%s","op":"%s","prev":"%s","seq":%s,"ts":%s}'
)
_PREIMAGE: Final = (
    b'{"content_sha256":"%s","memory_id":"%s","op":"%s","prev":"%s","seq":%s,"ts":%s}'
)


_OP_NAMES: Final = {b"save": "save", b"adopt": "adopt", b"forget": "forget"}
_TWO_TO_32: Final = b"4294967296"


def ts_literal_ok(ts: bytes) -> bool:
    """Whether a ``ts`` literal as the line patterns capture it (``_TS``: an optional "-",
    an integer part, an optional fraction) is one the fast line readers accept: with a
    fraction, exactly ``repr`` of its double (the shortest text that reads back as the same
    double); without, any integer but ``-0``.

    Most timestamps are decided without reading the double: a literal with a fraction of 1
    to 6 digits, the last not "0", and an integer part from 1 to 2**32 - 1. There doubles are
    at most 2**-21 apart (IEEE 754 binary64, 52 fraction bits), less than 10**-6, so no other
    decimal with at most as many fraction digits reads as the same double: the literal is
    the shortest round trip, which ``repr`` writes in fixed notation (1e-4 <= x < 1e16) with
    no trailing zero, so it is the literal itself. Any other literal with a fraction is
    compared with ``repr(float(ts))``; tests check the shortcut against that comparison.
    """
    dot = ts.find(b".")
    if dot < 0:
        return ts != b"-0"
    if (
        0 < dot <= 10
        and 2 <= len(ts) - dot <= 7
        and 0x30 < ts[0] <= 0x39
        and ts[-1] != 0x30
        and (dot < 10 or ts < _TWO_TO_32)
    ):
        return True
    return repr(float(ts)).encode() == ts


def _fields(
    line: bytes,
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bool] | None:
    """``(content_sha256, hash, memory_id, op, prev, seq, ts, preimage, canonical)`` of a line
    in either shape whose ``ts`` passes ``ts_literal_ok`` (all as the line's bytes; the
    preimage in the anchor form; ``canonical``: the line is in this library's shape), else
    ``None``."""
    m = CANONICAL_LINE.fullmatch(line)
    if m is not None:
        cs, claimed, mid, op, prev, seq, ts = m.groups()
        pre = line[:_CUT0] + line[_CUT1:]
        canonical = True
    else:
        m = ANCHOR_LINE.fullmatch(line)
        if m is None:
            return None
        seq, ts, op, mid, cs, prev, claimed = m.groups()
        pre = _PREIMAGE % (cs, mid, op, prev, seq, ts)
        canonical = False
    if not ts_literal_ok(ts):
        return None
    return cs, claimed, mid, op, prev, seq, ts, pre, canonical


def match_line(line: bytes) -> tuple[int, str, str, bytes, bytes, bytes, str] | None:
    """Recognise a well-formed entry line in either shape, without a JSON parser.

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        ``(seq, memory_id, content_sha256, prev, hash, preimage, op)``: ``prev`` and ``hash``
        as 64 lowercase hex ASCII bytes, ``preimage`` the anchor-form hash preimage of the
        entry (bytes), ``op`` one of ``OPS``; or ``None`` when ``line`` is not certainly a
        well-formed entry in one of the two shapes (use the general path then).
    """
    found = _fields(line)
    if found is None:
        return None
    cs, claimed, mid, op, prev, seq, _ts, pre, _canonical = found
    try:
        return int(seq), mid.decode("utf-8"), cs.decode(), prev, claimed, pre, _OP_NAMES[op]
    except UnicodeDecodeError:
        return None


def fast_fields(line: bytes) -> tuple[int, str, str, str, str] | None:
    """Read a line in this library's exact canonical form (``CANONICAL_LINE``).

    Returns:
        ``(seq, memory_id, content_sha256, prev, hash)`` when ``line`` (stripped, no newline)
        is byte for byte the RFC 8785 or anchor form of a well-formed entry whose
        ``memory_id`` needs no escape and whose ``ts`` has no exponent; then ``line`` minus
        ``HASH_SPAN`` is exactly the anchor-form hash preimage. ``None`` otherwise.
    """
    if CANONICAL_LINE.fullmatch(line) is None:
        return None
    found = match_line(line)
    if found is None:
        return None
    seq, mid, cs, prev, claimed, _pre, _op = found
    return seq, mid, cs, prev.decode(), claimed.decode()


def leaf_line(line: bytes) -> tuple[int, bytes, bytes, bytes, bytes] | None:
    """The RFC 6962 leaf data of a well-formed line whose hash matches, without a parser.

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        ``(seq, prev, hash, leaf data, memory_id)`` (hashes as 64 hex ASCII bytes; leaf data
        exactly ``Entry.line()`` of the entry the line parses to; the id's UTF-8 bytes, which
        need no escape in this shape) when ``match_line`` recognises the line and its hash
        matches its anchor-form preimage (for a line in this library's shape with the usual
        ``ts``, the leaf data is ``line`` itself); ``None`` otherwise (use the general path:
        ``Entry.from_dict(parse_line(line))``).
    """
    found = _fields(line)
    if found is None:
        return None
    cs, claimed, mid, op, prev, seq_b, ts, pre, canonical = found
    try:
        mid.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not hmac.compare_digest(hashlib.sha256(pre).hexdigest().encode(), claimed):
        return None
    # The literal is already ``number_text`` of its value (ts_literal_ok held): a fraction
    # is ``repr`` of a double, which ends in "0" only as the ".0" of an integral one, and
    # an integer of at most 15 characters is within 2**53. Then a line in this library's
    # shape is its own leaf data.
    as_written = not ts.endswith(b".0") if b"." in ts else len(ts) <= 15
    if as_written:
        if canonical:
            return int(seq_b), prev, claimed, line, mid
        ts_text = ts
    else:
        ts_text = number_text(float(ts)).encode()
    return int(seq_b), prev, claimed, _LEAF % (cs, claimed, mid, op, prev, seq_b, ts_text), mid
