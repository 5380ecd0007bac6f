"""The verify and sidecar fast paths agree exactly with the general (reference) path.

``ledger._entry.match_line`` / ``leaf_line`` read well-formed lines of both shapes (this
library's RFC 8785 lines and the anchor's ``json.dumps`` lines) without a JSON parser; the
verify walk (``_Walk.feed``) uses them only to accept lines, and sends anything else to
``_Walk.line``, the reference implementation of the anchor's walk. These tests check the
pieces against naive references (the JSON parser and encoder, ``Entry.line``) and the whole
walk against the general path alone, on random ledgers with random damage.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory.errors import LedgerFormatError
from merkle_memory.ledger import Ledger, _tail, verify_ledger
from merkle_memory.ledger import _verify as _ledger_verify
from merkle_memory.ledger._entry import (
    _TS,
    ANCHOR_LINE,
    CANONICAL_LINE,
    GENESIS,
    Entry,
    leaf_line,
    match_line,
    number_text,
    parse_line,
    ts_literal_ok,
)

_ANCHOR = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

ids = st.text(min_size=1, max_size=8).filter(lambda s: "\x00" not in s)
stamps = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(10**17), 10**17)
    | st.sampled_from([1789851202.0, 1789851200.1, 0.0, -0.0, 1e-5, 1e16, 2**53 + 1])
)


def _anchor_line(seq: int, ts: float, op: str, mid: str, cs: str, prev: str) -> tuple[str, str]:
    """(line text, hash) exactly as the anchor writes an entry (research/mnemo.md section 1)."""
    entry = {"seq": seq, "ts": ts, "op": op, "memory_id": mid, "content_sha256": cs}
    entry["prev"] = prev
    body = _ANCHOR.encode(entry).encode("utf-8", "surrogatepass")
    entry["hash"] = hashlib.sha256(body).hexdigest()
    return json.dumps(entry, ensure_ascii=False), entry["hash"]


def _lines(specs: list[tuple[bool, float, str, str]]) -> list[bytes]:
    """A valid chain: each spec is (anchor shape?, ts, op, memory_id)."""
    out: list[bytes] = []
    prev = GENESIS
    for seq, (anchor, ts, op, mid) in enumerate(specs, 1):
        cs = hashlib.sha256(mid.encode("utf-8", "surrogatepass")).hexdigest()
        if anchor:
            text, prev = _anchor_line(seq, ts, op, mid, cs, prev)
            out.append(text.encode("utf-8", "surrogatepass"))
        else:
            entry = Entry.create(seq, ts, op, mid, cs, prev)
            out.append(entry.line())
            prev = entry.hash
    return out


specs = st.lists(
    st.tuples(st.booleans(), stamps, st.sampled_from(["save", "adopt", "forget"]), ids),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(st.booleans(), stamps, st.sampled_from(["save", "adopt", "forget"]), ids)
def test_match_line_preimage_is_the_anchor_encoding(
    anchor: bool, ts: float, op: str, mid: str
) -> None:
    """A matched line's preimage is json.dumps(body, sort_keys, compact) of its parse, and its
    fields are the parsed ones; lines the fast path cannot vouch for are not matched."""
    try:
        (line,) = _lines([(anchor, ts, op, mid)])
    except LedgerFormatError:  # an id or ts this library refuses to write
        return
    found = match_line(line)
    obj = json.loads(line)
    if found is None:  # not vouched for: the general path takes the line instead
        assert Entry.from_dict(parse_line(line), check_hash=True).seq == 1
        return
    seq, got_mid, cs, prev, claimed, pre, got_op = found
    body = {k: v for k, v in obj.items() if k != "hash"}
    assert pre == _ANCHOR.encode(body).encode()
    assert (seq, got_mid, cs, prev, claimed, got_op) == (
        obj["seq"],
        obj["memory_id"],
        obj["content_sha256"],
        obj["prev"].encode(),
        obj["hash"].encode(),
        obj["op"],
    )


@settings(max_examples=150, deadline=None)
@given(specs)
def test_leaf_line_equals_entry_line(chain: list[tuple[bool, float, str, str]]) -> None:
    """leaf_line gives exactly Entry.from_dict(parse_line(line)).line() (the reference), and
    the id's UTF-8 bytes."""
    try:
        lines = _lines(chain)
    except LedgerFormatError:  # an id or ts this library refuses to write
        return
    for line in lines:
        fast = leaf_line(line)
        if fast is None:
            continue
        entry = Entry.from_dict(parse_line(line), check_hash=True)
        assert fast == (
            entry.seq,
            entry.prev.encode(),
            entry.hash.encode(),
            entry.line(),
            entry.memory_id.encode(),
        )


def _reference(path: Path, testimony: dict[str, str]) -> dict[str, object]:
    """verify_ledger through the general path only: every line via ``_Walk.line``."""
    head, head_error = _ledger_verify._read_head(path)
    walk = _ledger_verify._Walk(head)
    for raw in path.read_bytes().split(b"\n"):
        if raw.strip():
            walk.line(raw.strip())
    walk.finish(head_error)
    return _ledger_verify._judge(walk, testimony).to_dict()


damage = st.lists(
    st.tuples(
        st.sampled_from(["flip", "drop", "dup", "swap", "blank", "crlf", "reseq", "forge"]),
        st.integers(0, 10**6),
        st.integers(0, 255),
    ),
    max_size=3,
)


@settings(max_examples=120, deadline=None)
@given(specs, damage, st.none() | st.tuples(st.integers(0, 99), st.booleans()))
def test_verify_equals_general_path_on_damaged_ledgers(
    tmp_path_factory: pytest.TempPathFactory,
    chain: list[tuple[bool, float, str, str]],
    harm: list[tuple[str, int, int]],
    head: tuple[int, bool] | None,
) -> None:
    """On random chains of both shapes with random damage (flipped bytes, dropped, repeated,
    swapped or blank lines, CRLF endings, re-hashed entries with a wrong seq or other
    contents) and an optional ledger.head (right or wrong hash), verify_ledger's report
    equals the report of the general path alone, for a testimony that seals some ids and
    alters others."""
    try:
        lines = _lines(chain)
    except LedgerFormatError:  # an id or ts this library refuses to write
        return
    for kind, where, byte in harm:
        i = where % len(lines)
        if kind == "flip" and lines[i]:
            raw = bytearray(lines[i])
            raw[where % len(raw)] ^= byte or 1
            lines[i] = bytes(raw)
        elif kind == "drop":
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif kind == "blank":
            lines.insert(i, b"   ")
        elif kind == "crlf":
            lines[i] += b"\r"
        elif kind in ("reseq", "forge"):  # a well-formed entry with a valid hash, but
            try:  # a wrong seq (same prev), or other contents (same seq and prev)
                old = parse_line(lines[i])
                seq = old["seq"] + (byte % 3) + 1 if kind == "reseq" else old["seq"]
                mid = old["memory_id"] + ("" if kind == "reseq" else "x")
                entry = Entry.create(seq, 5.25, old["op"], mid, "c" * 64, old["prev"])
            except (LedgerFormatError, KeyError, TypeError):  # not an entry: left as it is
                continue
            lines[i] = (
                entry.line()
                if byte % 2
                else _anchor_line(seq, 5.25, old["op"], mid, "c" * 64, old["prev"])[0].encode()
            )
        if not lines:
            return
    path = tmp_path_factory.mktemp("fast") / "ledger.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    if head is not None:  # ledger.head naming some line's seq, with its hash or another
        try:
            named = parse_line(lines[head[0] % len(lines)].strip())
            record = {"seq": named["seq"], "hash": named["hash"] if head[1] else "d" * 64}
            path.with_name("ledger.head").write_text(json.dumps(record) + "\n")
        except (LedgerFormatError, KeyError, TypeError):  # not an entry: no head file
            pass
    testimony = {
        mid: hashlib.sha256(mid.encode("utf-8", "surrogatepass")).hexdigest()
        for n, (_a, _t, _o, mid) in enumerate(chain)
        if n % 3
    }
    testimony["never-sealed"] = "0" * 64
    if chain:
        testimony[chain[0][3]] = "f" * 64
    assert verify_ledger(path, testimony).to_dict() == _reference(path, testimony)


@pytest.mark.parametrize("anchor", [True, False])
def test_typical_ledgers_take_only_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anchor: bool
) -> None:
    """Ledgers of typical lines (float ts, plain and non-ASCII ids) in the anchor's format and
    in this library's verify intact without a single line through the general path, nor
    through the per-line ``_feed_one``: the walk's inline loop takes both shapes."""
    path = tmp_path / "ledger.jsonl"
    chain = [(anchor, 1789851200.0 + i / 7, "save", f"m{i}é✓") for i in range(300)]
    assert all(
        CANONICAL_LINE.fullmatch(line) or ANCHOR_LINE.fullmatch(line) for line in _lines(chain)
    )
    path.write_bytes(b"\n".join(_lines(chain)) + b"\n")
    calls: list[bytes] = []
    real = _ledger_verify._Walk.line
    monkeypatch.setattr(
        _ledger_verify._Walk, "line", lambda self, line: (calls.append(line), real(self, line))
    )
    one = _ledger_verify._Walk._feed_one
    monkeypatch.setattr(
        _ledger_verify._Walk, "_feed_one", lambda self, raw: (calls.append(raw), one(self, raw))
    )
    report = verify_ledger(path, {})
    assert (report.chain, report.entries, calls) == ("intact", 300, [])


@pytest.mark.parametrize("block", [1, 7, 300, 1 << 20])
def test_block_boundaries_and_snapshot_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Reading in blocks of any size gives the same report, and a callable testimony walks
    only the bytes present when it was taken (an appended line afterwards is unsealed)."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append_many([(f"m{i}", "ab" * 32) for i in range(20)], ts=1.5)
    monkeypatch.setattr(_ledger_verify, "_BLOCK", block)
    testimony = {f"m{i}": "ab" * 32 for i in range(21)}
    report = verify_ledger(led.path, testimony)
    assert (report.chain, report.entries, report.sealed, report.unsealed) == (
        "intact",
        20,
        20,
        ("m20",),
    )

    def late() -> dict[str, str]:
        with open(led.path, "ab") as handle:
            handle.write(Entry.create(21, 2.0, "save", "m20", "ab" * 32, GENESIS).line())
        return testimony

    report = verify_ledger(led.path, late)
    assert (report.chain, report.entries, report.unsealed) == ("intact", 20, ("m20",))


@pytest.mark.parametrize("anchor", [True, False])
def test_rehashed_entry_with_a_skipped_seq_is_a_gap(tmp_path: Path, anchor: bool) -> None:
    """An entry with a valid hash and the right prev but a skipped seq breaks the chain there
    with the anchor's gap reason (the fast path checks seq, not only prev and hash)."""
    lines = _lines([(anchor, 1.5, "save", "a"), (anchor, 2.5, "save", "b")])
    first = parse_line(lines[0])
    if anchor:
        forged = _anchor_line(3, 2.5, "save", "b", "c" * 64, first["hash"])[0].encode()
    else:
        forged = Entry.create(3, 2.5, "save", "b", "c" * 64, first["hash"]).line()
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(lines[0] + b"\n" + forged + b"\n")
    report = verify_ledger(path, {"a": first["content_sha256"], "b": "c" * 64})
    assert (report.chain, report.broken_at, report.reason) == (
        "broken",
        2,
        "sequence gap: expected 2, found 3",
    )
    assert (report.sealed, report.disputed) == (1, ("b",))


def _ts_reference(ts: bytes) -> bool:
    """What the line readers accepted before the shortcut: a fraction only as ``repr`` of its
    double, any integer but ``-0``."""
    return (b"." not in ts or repr(float(ts)).encode() == ts) and ts != b"-0"


_integer_parts = (
    st.integers(0, 20)
    | st.integers(2**31 - 5, 2**32 + 5)  # the shortcut's bound, 2**32, and its binade
    | st.integers(10**9, 2**34)  # 10-digit parts on both sides of it
    | st.integers(0, 10**16 - 1)
)
_fractions = st.none() | st.text("0123456789", min_size=1, max_size=8) | st.just("000001")


@given(st.booleans(), _integer_parts, _fractions)
@settings(max_examples=3000)
def test_ts_literal_ok_equals_the_repr_comparison(
    negative: bool, integer: int, fraction: str | None
) -> None:
    """``ts_literal_ok`` decides most timestamps without a float; on every literal the line
    patterns capture it agrees with comparing the literal to ``repr`` of its double."""
    ts = (b"-" if negative else b"") + b"%d" % integer
    if fraction is not None:
        ts += b"." + fraction.encode()
    assert re.fullmatch(_TS, ts) is not None
    assert ts_literal_ok(ts) is _ts_reference(ts)


@given(st.booleans(), st.booleans(), _integer_parts, _fractions)
@settings(max_examples=1500)
def test_leaf_line_data_is_the_line_with_number_text_ts(
    anchor: bool, negative: bool, integer: int, fraction: str | None
) -> None:
    """``leaf_line`` gives as leaf data the line rebuilt in this library's shape with ``ts``
    written by ``number_text`` (a line in that shape whose ``ts`` is already so written is
    returned as it is), for every ``ts`` literal in either shape; ``None`` exactly when
    ``ts_literal_ok`` refuses the literal."""
    ts = (b"-" if negative else b"") + b"%d" % integer
    if fraction is not None:
        ts += b"." + fraction.encode()
    cs, mid, prev = b"ab" * 32, "m\u00e9".encode(), GENESIS.encode()
    pre = b'{"content_sha256":"%s","memory_id":"%s","op":"adopt","prev":"%s","seq":7,"ts":%s}' % (
        cs,
        mid,
        prev,
        ts,
    )
    claimed = hashlib.sha256(pre).hexdigest().encode()
    if anchor:
        line = (
            b'{"seq": 7, "ts": %s, "op": "adopt", "memory_id": "%s", "content_sha256": "%s", '
            b'"prev": "%s", "hash": "%s"}' % (ts, mid, cs, prev, claimed)
        )
    else:
        line = pre[:-1].replace(b',"memory_id"', b',"hash":"%s","memory_id"' % claimed, 1) + b"}"
    found = leaf_line(line)
    if not ts_literal_ok(ts):
        assert found is None
        return
    written = number_text(float(ts)).encode()
    expected = (
        b'{"content_sha256":"%s","hash":"%s","memory_id":"%s","op":"adopt","prev":"%s",'
        b'"seq":7,"ts":%s}' % (cs, claimed, mid, prev, written)
    )
    assert found == (7, prev, claimed, expected, mid)


@pytest.mark.parametrize(
    ("ts", "accepted"),
    [
        (b"1789851200.123456", True),  # a microsecond timestamp: the shortcut
        (b"4294967295.999999", True),  # the shortcut's last integer part
        (b"4294967296.5", True),  # past it: repr decides (exact in binary)
        (b"4294967296.123456", True),  # past it: repr decides
        (b"8589934593.378877", False),  # doubles 2**-19 apart there: repr gives ...378878
        (b"1789851200.1088487", False),  # 7 digits: repr gives ...1088488
        (b"1.10", False),  # a trailing zero
        (b"1.0", True),  # repr of an integral double
        (b"0.1", True),
        (b"0.00001", False),  # repr writes 1e-05
        (b"-1.5", True),
        (b"-0", False),
        (b"-0.0", True),
        (b"7", True),
        (b"1.0000000000000001", False),  # the same double as 1.0
    ],
)
def test_ts_literal_ok_known_answers(ts: bytes, accepted: bool) -> None:
    assert ts_literal_ok(ts) is accepted
    assert _ts_reference(ts) is accepted


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hash", "AB" * 32),
        ("hash", "z" * 64),
        ("prev", "CD" * 32),
        ("prev", "g" * 64),
        ("content_sha256", "EF" * 32),
    ],
)
@pytest.mark.parametrize("anchor", [False, True])
def test_fast_loop_sends_non_hex_hashes_to_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str, anchor: bool
) -> None:
    """The verify loop's own line pattern takes any 64 bytes for ``hash`` and ``prev`` (it
    then compares them with a SHA-256 hex digest and the previous hash): a line whose
    ``hash`` or ``prev`` is not lowercase hex, even re-hashed to be self-consistent, never
    passes the fast loop (nor does a ``content_sha256`` that is not, which the pattern
    refuses), in this library's line shape and in the anchor's, and the report is the general
    path's (a break at that seq)."""
    lines = _lines([(anchor, 1.5, "save", "a"), (anchor, 2.5, "save", "b")])
    second = parse_line(lines[1])
    second[field] = value
    body = {k: v for k, v in second.items() if k != "hash"}
    if field != "hash":  # self-consistent: the hash of the altered body
        second["hash"] = hashlib.sha256(_ANCHOR.encode(body).encode()).hexdigest()
    if anchor:
        order = ("seq", "ts", "op", "memory_id", "content_sha256", "prev", "hash")
        lines[1] = json.dumps({k: second[k] for k in order}, ensure_ascii=False).encode()
        fast = _ledger_verify._FAST_ANCHOR.fullmatch(lines[1])
        strict = ANCHOR_LINE.fullmatch(lines[1])
    else:
        lines[1] = json.dumps(second, sort_keys=True, separators=(",", ":")).encode()
        fast = _ledger_verify._FAST_LINE.fullmatch(lines[1])
        strict = CANONICAL_LINE.fullmatch(lines[1])
    assert (fast is not None, strict) == (field != "content_sha256", None)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    calls: list[bytes] = []
    real = _ledger_verify._Walk.line
    monkeypatch.setattr(
        _ledger_verify._Walk, "line", lambda self, line: (calls.append(line), real(self, line))
    )
    testimony = {"a": parse_line(lines[0])["content_sha256"]}
    report = verify_ledger(path, testimony)
    assert calls == [lines[1]]
    assert report.to_dict() == _reference(path, testimony)
    assert (report.chain, report.broken_at, report.entries) == ("broken", 2, 2)


def test_append_reads_only_the_tail_and_flushes_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One append on a 600 KB ledger by a new Ledger object reads the last 4 KiB of it once
    (the fragment check and the tail line from one read; no 64 KiB blocks), and flushes exactly
    twice, ``fdatasync`` each: the line, then one slot of ledger.head (DESIGN section 4
    append order; no fsync at all: no temp file, no folder); the result is the same chain as
    ever."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append_many([(f"m{i}", "ab" * 32) for i in range(2000)])
    read: list[tuple[str, int]] = []
    synced: list[tuple[str, str]] = []
    real_pread, real_fsync, real_fdatasync = os.pread, os.fsync, os.fdatasync

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def pread(fd: int, n: int, at: int) -> bytes:
        data = real_pread(fd, n, at)
        read.append((name(fd), len(data)))
        return data

    monkeypatch.setattr(os, "pread", pread)
    monkeypatch.setattr(
        os, "fsync", lambda fd: synced.append(("fsync", name(fd))) or real_fsync(fd)
    )
    monkeypatch.setattr(
        os, "fdatasync", lambda fd: synced.append(("fdatasync", name(fd))) or real_fdatasync(fd)
    )
    entry = Ledger(led.path).append("last", "cd" * 32)
    monkeypatch.undo()
    assert entry.seq == 2001
    assert sum(n for file, n in read if file == "ledger.jsonl") == 4096  # the tail, once
    assert [n for file, n in read if file != "ledger.jsonl"] == [8192]  # the head, read once
    assert synced == [("fdatasync", "ledger.jsonl"), ("fdatasync", "ledger.head")]
    report = verify_ledger(led.path, {})
    assert (report.chain, report.entries, report.broken_at) == ("intact", 2001, None)


class _Bytes:
    """A ``LedgerFile`` reading from bytes (only ``read`` is used by the tail readers)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset : offset + length]


_PIECES = st.sampled_from([b"\n", b"  \n", b"\t", b"x" * 300, b"y" * 5000, b'{"a":1}', b"\xe2\x9c"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12))
def test_read_tail_is_split_fragment_and_the_last_line(pieces: list[bytes]) -> None:
    """``read_tail`` (one read of the end) gives what ``split_fragment`` and the first line
    of ``iter_lines_backwards`` give (the reference), or says it could not see the line whole
    (``None``, only when the ledger is longer than its first read)."""
    data = b"".join(pieces)
    file = _Bytes(data)
    offset, fragment, last = _tail.read_tail(file, len(data))  # type: ignore[arg-type]
    assert (offset, fragment) == _tail.split_fragment(file, len(data))  # type: ignore[arg-type]
    expected = next(iter(_tail.iter_lines_backwards(file, offset)), b"")  # type: ignore[arg-type]
    if last is None:
        assert len(data) > 4096  # the caller then reads backwards (the reference itself)
    else:
        assert last == expected
