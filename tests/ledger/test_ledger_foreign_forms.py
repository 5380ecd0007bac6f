"""An id's entries written by another program in another valid line form.

``ledger.jsonl`` may hold an id's entries in any valid JSON form: this library's (RFC 8785),
mnemo-cortex's spaced one, and any other a foreign writer made (``\\uXXXX`` escapes, other key
order, CRLF). Every reader that looks for an id's entries (``_tail.iter_objects_naming``) must
see them all, latest first: a re-save interrupted after its line is settled by the id's true
latest entry (``Tenant._settle_pending``), a pending version counts as testimony only when an
entry sealed the record beside it (``Tenant._testimony``), and ``latest_entry`` (forgets,
reappeared memories) finds the latest entry whatever its form.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FOREIGN_FORMS, append_entries, entry_line

from merkle_memory import canonical
from merkle_memory.errors import LedgerFormatError
from merkle_memory.ledger import GENESIS, Ledger, Tenant, _tail
from merkle_memory.ledger._entry import parse_line, shaped_escaped_memory_id
from merkle_memory.ledger._tail import iter_objects_naming
from merkle_memory.ledger.tombstones import latest_entry

MID = "café"
"""An id whose JSON string differs in every form below (spaces, ``\\u00e9``, ``\\u0063...``)."""

OLD = {"id": MID, "summary": "old"}
NEW = {"id": MID, "summary": "new"}

MISSED = ("anchor", "escaped", "reordered", "crlf")
"""The forms in which a byte search for ``"memory_id":"café"`` finds no line."""


def _digest(tenant: Tenant, record: dict[str, str]) -> str:
    """The record's testimony digest (the default mode: RFC 8785 of the sealed fields)."""
    return canonical.digest({f: record.get(f) for f in tenant.sealed_fields})


def _write_record(tenant: Tenant, record: dict[str, str], suffix: str = ".json") -> None:
    path = tenant.memory_dir / f"{record['id']}{suffix}"
    path.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")


def _summary(tenant: Tenant) -> Any:
    return json.loads((tenant.memory_dir / f"{MID}.json").read_text(encoding="utf-8"))["summary"]


def _last_hash(tenant: Tenant) -> str:
    last = tenant.ledger.last()
    assert last is not None
    return last.hash


@pytest.mark.parametrize("form", MISSED)
def test_a_pending_version_the_latest_foreign_entry_names_is_promoted(
    form: str, tmp_path: Path
) -> None:
    """Seq 1 (this library) seals ``old``; seq 2, in a foreign form, seals ``new``, which is
    still ``café.json.pending`` (the rename was lost). ``seal`` renames it over ``café.json``
    (was: removed, so the acknowledged version was lost and verify said altered)."""
    tenant = Tenant(tmp_path / "t")
    first = tenant.save(OLD)
    new = _digest(tenant, NEW)
    append_entries(
        tenant.root / "ledger.jsonl", [(MID, form)], prev=first.hash, seq=1, digests=[new]
    )
    _write_record(tenant, NEW, ".json.pending")
    assert tenant._sealed_digests(MID) == [new, first.content_sha256]
    assert tenant.testimony()[MID] == (first.content_sha256, new)
    result = tenant.seal()
    assert (result.ok, result.report.sealed, result.report.altered, result.sealed_ids) == (
        True,
        1,
        (),
        (),
    )
    assert _summary(tenant) == "new"
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == [f"{MID}.json"]


@pytest.mark.parametrize("form", MISSED)
def test_a_pending_version_an_older_entry_names_is_removed(form: str, tmp_path: Path) -> None:
    """Seq 1 and 2 (this library) seal ``old`` then ``new``, whose rename was lost; then a
    foreign writer put ``old`` back and sealed it at seq 3. The latest entry names ``old``:
    ``seal`` removes the pending ``new`` and ``café.json`` stays ``old`` (was: ``new`` was
    promoted over it, by seq 2 taken as the latest, and verify said altered)."""
    tenant = Tenant(tmp_path / "t")
    first = tenant.save(OLD)
    second = tenant.save(NEW)
    old, new = first.content_sha256, second.content_sha256
    append_entries(
        tenant.root / "ledger.jsonl", [(MID, form)], prev=second.hash, seq=2, digests=[old]
    )
    _write_record(tenant, OLD)
    _write_record(tenant, NEW, ".json.pending")
    assert tenant._sealed_digests(MID) == [old, new, old]
    result = tenant.seal()
    assert (result.ok, result.report.sealed, result.report.altered) == (True, 1, ())
    assert _summary(tenant) == "old"
    assert sorted(p.name for p in tenant.memory_dir.iterdir()) == [f"{MID}.json"]


@pytest.mark.parametrize("form", MISSED)
def test_a_pending_version_counts_when_only_foreign_entries_seal_the_id(
    form: str, tmp_path: Path
) -> None:
    """Every entry of ``café`` is foreign: seq 2 seals ``old`` (``café.json``), seq 3 seals
    ``new`` (still pending). The pending version is testimony, so verify says sealed, not
    altered (was: no entry was seen, the pending file was ignored)."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "a", "summary": "a"})
    old, new = _digest(tenant, OLD), _digest(tenant, NEW)
    append_entries(
        tenant.root / "ledger.jsonl",
        [(MID, form), (MID, form)],
        prev=_last_hash(tenant),
        seq=1,
        digests=[old, new],
    )
    _write_record(tenant, OLD)
    _write_record(tenant, NEW, ".json.pending")
    assert tenant._sealed_digests(MID) == [new, old]
    assert tenant.testimony()[MID] == (old, new)
    report = tenant.verify()
    assert (report.ok, report.chain, report.entries, report.sealed, report.altered) == (
        True,
        "intact",
        3,
        2,
        (),
    )


@pytest.mark.parametrize("form", ["escaped", "reordered"])
def test_latest_entry_finds_an_escaped_later_entry(form: str, tmp_path: Path) -> None:
    """Seq 1 saves ``café`` (this library's form); seq 2 forgets it in a form whose id is
    written with ``\\uXXXX`` escapes. ``latest_entry`` is seq 2 (was: seq 1, the byte search
    for ``"café"`` missing the escaped id)."""
    led = Ledger(tmp_path / "ledger.jsonl")
    first = led.append(MID, "a" * 64)
    append_entries(
        tmp_path / "ledger.jsonl",
        [(MID, form)],
        prev=first.hash,
        seq=1,
        digests=["b" * 64],
        op="forget",
    )
    found = latest_entry(led, MID)
    assert found is not None
    assert (found.seq, found.op, found.memory_id, found.content_sha256) == (
        2,
        "forget",
        MID,
        "b" * 64,
    )
    assert latest_entry(led, "caf") is None


def _seqs_and_parses(
    path: Path, monkeypatch: pytest.MonkeyPatch, *memory_ids: str
) -> list[tuple[list[int], int]]:
    """For each id: the seqs ``iter_objects_naming`` yields on the ledger at ``path``, and
    how many lines it parsed to find them."""
    parsed: list[bytes] = []

    def counting(line: bytes) -> dict[str, Any]:
        parsed.append(line)
        return parse_line(line)

    monkeypatch.setattr(_tail, "parse_line", counting)
    found = []
    with Ledger(path).store.reader() as file:
        assert file is not None
        for memory_id in memory_ids:
            parsed.clear()
            seqs = [obj["seq"] for obj in iter_objects_naming(file, file.size(), memory_id)]
            found.append((seqs, len(parsed)))
    return found


def test_lines_of_other_ids_in_the_fixed_shapes_are_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path: no line of another id in this library's or the anchor's shape is
    parsed, not even for the id ``save``, whose JSON string is in every line as the op; only
    the three lines of ``k7`` (the one line of ``save``) are."""
    path = tmp_path / "ledger.jsonl"
    others = [(f"k{i}", "canonical" if i % 2 else "anchor") for i in range(20)]
    plan = [*others, ("save", "canonical"), ("k7", "anchor"), *others]
    append_entries(path, plan)
    assert _seqs_and_parses(path, monkeypatch, "k7", "save") == [([30, 22, 8], 3), ([21], 1)]


def test_escaped_lines_of_other_ids_are_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines whose id is written with escapes (this library's lines of ids holding ``"`` or
    ``\\``, an anchor line with every character as ``\\uXXXX``) are read by their id token
    alone: only the lines of the id looked for are parsed (each line of the ledger below holds
    a backslash, and a byte search for ``"n7"``'s string finds nothing)."""
    path = tmp_path / "ledger.jsonl"
    others = [(f'n"{i}', "canonical") for i in range(15)]
    others += [(f"n\\{i}", "canonical") for i in range(15)]
    others += [(f"n{i}é", "escaped") for i in range(15)]
    plan = [*others, ('n"7', "escaped"), *others]
    append_entries(path, plan)
    found = _seqs_and_parses(path, monkeypatch, 'n"7', "n7é")
    assert found == [([54, 46, 8], 3), ([84, 38], 2)]


class _CountedReads:
    """A ``LedgerFile`` over bytes that records the length of every read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads: list[int] = []

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        self.reads.append(length)
        return self.data[offset : offset + length]


def test_a_recent_entry_costs_one_small_read(tmp_path: Path) -> None:
    """The reads start with 4 KiB at the end and grow sixteenfold up to the block (a store
    without an id index, such as PostgreSQL's, proves a recent entry after one small read):
    the last entry of 3,000 is found in the first 4,096 bytes; the first entry takes reads
    of 4 KiB, 64 KiB and then 1 MiB."""
    path = tmp_path / "ledger.jsonl"
    append_entries(path, [(f"k{i}", "canonical") for i in range(3000)])
    data = path.read_bytes()
    assert len(data) > (4096 + 65536) + 1024
    file = _CountedReads(data)
    assert next(iter_objects_naming(file, file.size(), "k2999"))["seq"] == 3000  # type: ignore[arg-type]
    assert file.reads == [4096]
    file.reads.clear()
    found = list(iter_objects_naming(file, file.size(), "k0"))  # type: ignore[arg-type]
    assert [obj["seq"] for obj in found] == [1]
    assert file.reads == [4096, 65536, len(data) - 4096 - 65536]


def test_a_str_subclass_id_is_read_as_its_value(tmp_path: Path) -> None:
    """An id given as a subclass of ``str`` finds the entries of its value (it found none)."""

    class Id(str):
        pass

    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("k", "a" * 64)
    led.append("j", "b" * 64)
    entry = latest_entry(led, Id("k"))
    assert entry is not None and (entry.seq, entry.memory_id) == (1, "k")
    with led.store.reader() as file:
        assert file is not None
        assert [o["seq"] for o in iter_objects_naming(file, file.size(), Id("j"))] == [2]
        assert list(iter_objects_naming(file, file.size(), 5)) == []  # type: ignore[arg-type]


# --- the reader against a naive one: parse every line, keep the id's, reverse -------------------

IDS = ("k1", "k10", "k", "é1", 'a"b', "a\\b", "\x01x", "😀", "\u2028", "seq", "save")
JUNK = (
    b'{"memory_id":"k1"}',  # names the id, no entry
    b'{"memory_id": "k\\u0031", "content_sha256": 5}',
    b'{"memory_id":"k1","memory_id":"k1"}',  # a duplicate key: unparseable
    b'{"memory_id":"\\ud800"}',  # a lone surrogate, escaped
    b'{"memory_id":"k1\xff"}',  # not UTF-8
    b'["k1", "\\\\"]',  # not an object
    b'not json "k1" \\',
    b"   ",
    b"",
)


def _naive(data: bytes, memory_id: str) -> list[dict[str, Any]]:
    found = []
    for raw in data.split(b"\n"):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = parse_line(line)
        except LedgerFormatError:
            continue
        if obj.get("memory_id") == memory_id:
            found.append(obj)
    return found[::-1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(IDS), st.sampled_from(("canonical", *FOREIGN_FORMS))),
            st.sampled_from(JUNK),
        ),
        max_size=12,
    ),
    memory_id=st.sampled_from((*IDS, "\ud800", "k1\x00")),
    block=st.one_of(st.integers(1, 400), st.just(1 << 20)),
    cut=st.integers(0, 10_000),
)
def test_objects_naming_matches_a_full_parse(
    items: list[tuple[str, str] | bytes], memory_id: str, block: int, cut: int
) -> None:
    """For any mix of entry lines (every form), junk and blank lines, any end offset and any
    block size: exactly the objects a parse of every line finds for the id, last first."""
    lines = []
    for seq, item in enumerate(items, 1):
        if isinstance(item, bytes):
            lines.append(item + b"\n")
        else:
            mid, form = item
            body = {
                "seq": seq,
                "ts": 1_789_851_200.5,
                "op": "save",
                "memory_id": mid,
                "content_sha256": f"{seq:064x}",
                "prev": GENESIS,
            }
            lines.append(entry_line(body, form))
    data = b"".join(lines)
    end = min(cut, len(data))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        path.write_bytes(data)
        with Ledger(path).store.reader() as file:
            assert file is not None
            got = list(iter_objects_naming(file, end, memory_id, block))
    assert got == _naive(data[:end], memory_id)


@settings(max_examples=300, deadline=None)
@given(memory_id=st.text(min_size=1, max_size=12), form=st.sampled_from(("canonical", "escaped")))
def test_an_escaped_id_token_decodes_as_the_parse_reads_it(memory_id: str, form: str) -> None:
    """``shaped_escaped_memory_id`` gives the id a full parse of the line gives, for any id
    in this library's form and in the anchor's with every character escaped."""
    body = {
        "seq": 1,
        "ts": 1.5,
        "op": "save",
        "memory_id": memory_id,
        "content_sha256": "a" * 64,
        "prev": "0" * 64,
    }
    line = entry_line(body, form).strip()
    assert shaped_escaped_memory_id(line) == parse_line(line)["memory_id"] == memory_id
