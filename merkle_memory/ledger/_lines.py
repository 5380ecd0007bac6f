"""Reading well-formed ledger lines without a JSON parser: the verify fast path (private).

Two line shapes cover nearly every ledger (DESIGN section 4):

- this library's: ``canonical.dumps(entry)``, keys sorted, no spaces (``CANONICAL_LINE``);
- the anchor's: ``json.dumps(entry, ensure_ascii=False)``, keys in insertion order ``seq, ts,
  op, memory_id, content_sha256, prev, hash`` and default separators (``ANCHOR_LINE``;
  research/mnemo.md section 1).

``match_line`` recognises either shape when the ``memory_id`` needs no escape and ``ts`` is
written without an exponent, exactly as the anchor's encoder writes that value (``repr`` of
the float, or the integer's digits). Such a line parses (strict: no duplicate key, no NaN) to
a well-formed entry, and its hash preimage in the anchor form (``json.dumps(body,
sort_keys=True, separators=(",", ":"), ensure_ascii=False)``) is a fixed rearrangement of its
bytes, so the entry hash is checked with one SHA-256 and no parse or encode. A line that does
not match is *not* judged here: the caller takes the general path (strict parse, both hash
forms), which is the reference; this module only accelerates lines that are certainly
well-formed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Final

from ._entry import number_text

__all__ = ["ANCHOR_LINE", "CANONICAL_LINE", "HASH_SPAN", "fast_fields", "leaf_line", "match_line"]

_MID: Final = rb'"([^"\\\x00-\x1f]+)"'
_HEX: Final = rb'"([0-9a-f]{64})"'
_SEQ: Final = rb"([1-9][0-9]{0,15})"
_TS: Final = rb"(-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,17})?)"

CANONICAL_LINE: Final = re.compile(
    rb'\{"content_sha256":' + _HEX + rb',"hash":' + _HEX + rb',"memory_id":' + _MID
    + rb',"op":"(save|adopt)","prev":' + _HEX + rb',"seq":' + _SEQ + rb',"ts":' + _TS + rb"\}"
)  # fmt: skip
"""A line as this library writes it (groups: content_sha256, hash, memory_id, op, prev, seq,
ts)."""

ANCHOR_LINE: Final = re.compile(
    rb'\{"seq": ' + _SEQ + rb', "ts": ' + _TS + rb', "op": "(save|adopt)", "memory_id": ' + _MID
    + rb', "content_sha256": ' + _HEX + rb', "prev": ' + _HEX + rb', "hash": ' + _HEX + rb"\}"
)  # fmt: skip
"""A line as the anchor writes it (groups: seq, ts, op, memory_id, content_sha256, prev,
hash)."""

HASH_SPAN: Final = (85, 159)
"""Byte span of ``"hash":"<64 hex>",`` in a ``CANONICAL_LINE``; the rest is the preimage."""

_CUT0, _CUT1 = HASH_SPAN
_LEAF: Final = (
    b'{"content_sha256":"%s","hash":"%s","memory_id":"%s","op":"%s","prev":"%s","seq":%s,"ts":%s}'
)
_PREIMAGE: Final = (
    b'{"content_sha256":"%s","memory_id":"%s","op":"%s","prev":"%s","seq":%s,"ts":%s}'
)


def match_line(line: bytes) -> tuple[int, str, str, bytes, bytes, bytes] | None:
    """Recognise a well-formed entry line in either shape, without a JSON parser.

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        ``(seq, memory_id, content_sha256, prev, hash, preimage)``: ``prev`` and ``hash`` as
        64 lowercase hex ASCII bytes, ``preimage`` the anchor-form hash preimage of the entry
        (bytes); or ``None`` when ``line`` is not certainly a well-formed entry in one of the
        two shapes (use the general path then).
    """
    m = CANONICAL_LINE.fullmatch(line)
    if m is not None:
        cs, claimed, mid, _op, prev, seq, ts = m.groups()
        pre = line[:_CUT0] + line[_CUT1:]
    else:
        m = ANCHOR_LINE.fullmatch(line)
        if m is None:
            return None
        seq, ts, op, mid, cs, prev, claimed = m.groups()
        pre = _PREIMAGE % (cs, mid, op, prev, seq, ts)
    if b"." in ts:
        if repr(float(ts)).encode() != ts:
            return None
    elif ts == b"-0":
        return None
    try:
        return int(seq), mid.decode("utf-8"), cs.decode(), prev, claimed, pre
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
    seq, mid, cs, prev, claimed, _pre = found
    return seq, mid, cs, prev.decode(), claimed.decode()


def leaf_line(line: bytes) -> tuple[int, bytes, bytes, bytes] | None:
    """The RFC 6962 leaf data of a well-formed line whose hash matches, without a parser.

    Args:
        line: one ledger line, stripped of surrounding whitespace.

    Returns:
        ``(seq, prev, hash, leaf data)`` (hashes as 64 hex ASCII bytes; leaf data exactly
        ``Entry.line()`` of the entry the line parses to) when ``match_line`` recognises the
        line and its hash matches its anchor-form preimage; ``None`` otherwise (use the
        general path: ``Entry.from_dict(parse_line(line))``).
    """
    found = match_line(line)
    if found is None:
        return None
    seq, _mid, _cs, prev, claimed, pre = found
    if not hmac.compare_digest(hashlib.sha256(pre).hexdigest().encode(), claimed):
        return None
    m = CANONICAL_LINE.fullmatch(line)
    if m is not None:
        cs, _h, mid, op, _p, seq_b, ts = m.groups()
    else:
        m = ANCHOR_LINE.fullmatch(line)
        if m is None:  # pragma: no cover - match_line matched one of the two
            return None
        seq_b, ts, op, mid, cs, _p, _h = m.groups()
    ts_text = number_text(float(ts)).encode()
    return seq, prev, claimed, _LEAF % (cs, claimed, mid, op, prev, seq_b, ts_text)
