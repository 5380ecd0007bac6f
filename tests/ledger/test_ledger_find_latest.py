"""Proving by id without an id index: the id's latest entry, whatever the line's form.

``_find_latest`` serves ``prove_inclusion`` when the sidecar files cannot be written (a
read-only auditor: the in-memory path), for stores that keep no id index, and after an index
names another id. A later entry of the id written by another program in another valid form
(spaces, an escaped id, other key order, CRLF) must be found, not an older one.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FOREIGN_FORMS, append_entries

from merkle_memory.errors import LedgerError
from merkle_memory.ledger import GENESIS, Entry, Ledger, proofs
from merkle_memory.ledger._entry import parse_line
from merkle_memory.ledger.proofs import _find_latest, prove_inclusion, tree_head


def _last_hash(led: Ledger) -> str:
    last = led.last()
    assert last is not None
    return last.hash


def _naive(path: Path, memory_id: str, size: int) -> Entry | None:
    """Parse every line; the last entry of the id with seq at most ``size``."""
    found = None
    for raw in path.read_bytes().split(b"\n"):
        line = raw.strip()
        if not line:
            continue
        try:
            entry = Entry.from_dict(parse_line(line), check_hash=True)
        except LedgerError:
            continue
        if entry.memory_id == memory_id and entry.seq <= size:
            found = entry
    return found


@pytest.mark.parametrize("form", FOREIGN_FORMS)
def test_a_later_entry_in_a_foreign_form_is_the_latest(form: str, tmp_path: Path) -> None:
    """The reviewer's case: two library entries, then ``k1`` again in another form."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("k1", "a" * 64)
    e2 = led.append("k2", "b" * 64)
    append_entries(tmp_path / "ledger.jsonl", [("k1", form)], prev=e2.hash, seq=2)
    found = _find_latest(led.store, "k1", 3)
    assert found is not None
    assert (found.seq, found.memory_id, found.content_sha256) == (3, "k1", f"{3:064x}")
    older = _find_latest(led.store, "k1", 2)
    assert older is not None and older.seq == 1
    assert _find_latest(led.store, "k2", 3) == e2
    assert _find_latest(led.store, "k", 3) is None
    assert _find_latest(led.store, "k1", 0) is None


@pytest.mark.parametrize("form", FOREIGN_FORMS)
def test_read_only_prove_finds_a_later_foreign_entry(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only auditor (the sidecar cannot be written: proofs in memory, no id index)
    proves the id's latest entry."""

    def denied(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    led = Ledger(tmp_path / "ledger.jsonl")
    led.append_many([(f"k{i % 3}", f"{i:064x}") for i in range(6)], ts=1_700_000_000)
    plan = [("k1", form), ("k2", "canonical"), ("k0", form)]
    append_entries(tmp_path / "ledger.jsonl", plan, prev=_last_hash(led), seq=6)
    monkeypatch.setattr(proofs, "_sync_locked", denied)
    proof = prove_inclusion(tmp_path, "k1")
    assert (proof.entry.seq, proof.entry.memory_id, proof.tree_size) == (7, "k1", 9)
    assert proof.entry.content_sha256 == f"{7:064x}"
    proof.verify(tree_head(tmp_path, "o").root)
    assert prove_inclusion(tmp_path, "k0").entry.seq == 9
    assert prove_inclusion(tmp_path, "k2").entry.seq == 8
    assert not (tmp_path / "ledger.tree.state").exists()


IDS = ("k1", "k10", "k", "é1", 'a"b', "a\\b", "\x01x", "😀", "\u2028")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(IDS), st.sampled_from(("canonical", *FOREIGN_FORMS))),
        max_size=14,
    ),
    junk=st.lists(st.integers(0, 14), max_size=3),
    memory_id=st.sampled_from(IDS),
    extra=st.integers(0, 2),
)
def test_find_latest_matches_a_full_parse(
    plan: list[tuple[str, str]], junk: list[int], memory_id: str, extra: int
) -> None:
    """Against the naive reference, for every size: exactly the same entry (or none)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        prev = GENESIS
        path.write_bytes(b"")
        for index, item in enumerate(plan):
            if index in junk:  # a line that is no entry, and a blank one
                with path.open("ab") as f:
                    f.write(b'{"memory_id":"k1"}\n\n')
            prev = append_entries(path, [item], prev=prev, seq=index)
        led = Ledger(path)
        for size in range(len(plan) + extra + 1):
            assert _find_latest(led.store, memory_id, size) == _naive(path, memory_id, size)
