"""Hypothesis properties of the ledger (issue 3 acceptance list).

fsync is replaced by a no-op inside these examples: durability is not what they check, and
real fsyncs would make hundreds of appends per example too slow.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.errors import LedgerFormatError, LedgerRollbackError
from merkle_memory.ledger import GENESIS, Entry, records
from merkle_memory.ledger._entry import fast_fields, number_text, parse_line
from merkle_memory.ledger.tenant import Tenant

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-é✓", min_size=1, max_size=12)
summaries = st.text(max_size=30)


def no_fsync() -> Any:
    return mock.patch("os.fsync", lambda fd: None)


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(summaries, min_size=1, max_size=4))
def test_cut_inside_last_line_with_old_head_recovers(items: list[str]) -> None:
    """Cutting ledger.jsonl at every byte offset inside its last line, with ledger.head as it
    was before that append, then sealing once, gives an intact chain holding every
    acknowledged entry."""
    with tempfile.TemporaryDirectory() as tmp, no_fsync():
        t = Tenant(Path(tmp) / "t")
        for i, s in enumerate(items[:-1]):
            t.save({"id": f"r{i}", "summary": s})
        head_before = t.ledger.head_path.read_bytes() if t.ledger.head_path.exists() else None
        start = t.ledger.path.stat().st_size if t.ledger.path.exists() else 0
        t.save({"id": f"r{len(items) - 1}", "summary": items[-1]})
        full = t.ledger.path.read_bytes()
        acked = full[:start]
        for cut in range(start, len(full)):  # every byte offset inside the last line
            t.ledger.path.write_bytes(full[:cut])
            if head_before is None:
                t.ledger.head_path.unlink(missing_ok=True)
            else:
                t.ledger.head_path.write_bytes(head_before)
            t.ledger.torn_path.unlink(missing_ok=True)
            res = Tenant(t.root).seal()
            assert res.report.chain == "intact"
            assert res.report.ok and res.report.unsealed == ()
            after = t.ledger.path.read_bytes()
            assert after.startswith(acked)
            assert res.report.sealed == len(items)


@SETTINGS
@given(st.lists(summaries, min_size=1, max_size=4), st.data())
def test_cut_with_head_updated_is_a_rollback(items: list[str], data: Any) -> None:
    """The same cut with ledger.head already naming the lost entry is refused as a rollback
    (and a cut that only drops the final newline loses nothing and is accepted)."""
    with tempfile.TemporaryDirectory() as tmp, no_fsync():
        t = Tenant(Path(tmp) / "t")
        for i, s in enumerate(items):
            t.save({"id": f"r{i}", "summary": s})
        full = t.ledger.path.read_bytes()
        start = full.rstrip(b"\n").rfind(b"\n") + 1
        cut = start + data.draw(st.integers(0, 10**6)) % (len(full) - start)
        t.ledger.path.write_bytes(full[:cut])
        if cut == len(full) - 1:
            assert Tenant(t.root).seal().report.chain == "intact"
        else:
            with pytest.raises(LedgerRollbackError):
                Tenant(t.root).seal()
            assert t.ledger.path.read_bytes() == full[:cut]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = [f for f in records.DEFAULT_SEALED_FIELDS if f != "id"]


@SETTINGS
@given(
    st.lists(st.fixed_dictionaries({f: json_values for f in FIELDS}), min_size=1, max_size=4),
    st.data(),
)
def test_any_sealed_field_change_names_exactly_that_record(
    recs: list[dict[str, Any]], data: Any
) -> None:
    """Changing any sealed field other than id of one record makes verify name exactly that
    record altered, and every other record stays sealed."""
    with tempfile.TemporaryDirectory() as tmp, no_fsync():
        t = Tenant(Path(tmp) / "t")
        for i, rec in enumerate(recs):
            t.save({"id": f"r{i}", **rec})
        k = data.draw(st.integers(0, len(recs) - 1))
        field = data.draw(st.sampled_from(FIELDS))
        new = data.draw(
            json_values.filter(lambda v: canonical.dumps(v) != canonical.dumps(recs[k][field]))
        )
        path = t.memory_dir / f"r{k}.json"
        rec = json.loads(path.read_text(encoding="utf-8"))
        rec[field] = new
        path.write_text(json.dumps(rec), encoding="utf-8")
        rep = t.verify()
        assert rep.altered == (f"r{k}",)
        assert rep.sealed == len(recs) - 1 and rep.chain == "intact"


@SETTINGS
@given(st.lists(ids, min_size=2, max_size=4, unique=True), st.data())
def test_single_byte_change_breaks_at_that_line(mids: list[str], data: Any) -> None:
    """Any single-byte change inside a ledger line that changes its parsed entry breaks the
    chain at exactly that line's seq."""
    with tempfile.TemporaryDirectory() as tmp, no_fsync():
        t = Tenant(Path(tmp) / "t")
        entries = t.ledger.append_many([(m, canonical.digest(m)) for m in mids])
        lines = t.ledger.path.read_bytes().split(b"\n")[:-1]
        i = data.draw(st.integers(0, len(lines) - 1))
        pos = data.draw(st.integers(0, 10**6)) % len(lines[i])
        byte = data.draw(st.integers(0, 255).filter(lambda b: b != lines[i][pos]))
        changed = lines[i][:pos] + bytes([byte]) + lines[i][pos + 1 :]
        try:
            same = parse_line(changed.strip()) == entries[i].to_dict()
        except LedgerFormatError:
            same = False
        if same:
            return
        lines[i] = changed
        t.ledger.path.write_bytes(b"\n".join(lines) + b"\n")
        rep = t.verify()
        assert (rep.chain, rep.broken_at) == ("broken", i + 1)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**17), 10**17),
    st.sampled_from(["save", "adopt"]),
    st.text(min_size=1, max_size=10).filter(lambda s: "\x00" not in s),
)
def test_fast_line_equals_canonical_dumps(seq: int, ts: float, op: str, mid: str) -> None:
    """The fast line and hash builders agree with canonical.dumps/digest (naive reference),
    and a fast-read line gives the fields a JSON parse gives."""
    try:
        e = Entry.create(seq, ts, op, mid, "a" * 64, GENESIS)
    except LedgerFormatError:
        return  # e.g. a lone surrogate in the id
    assert e.line() == canonical.dumps(e.to_dict())
    assert e.hash == canonical.digest(e.body())
    assert number_text(e.ts) == canonical.format_number(e.ts)
    fields = fast_fields(e.line())
    if fields is not None:
        parsed = json.loads(e.line())
        assert fields == (seq, parsed["memory_id"], "a" * 64, GENESIS, e.hash)
