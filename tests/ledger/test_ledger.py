"""Ledger: line format, both hash forms, append, torn tail, rollback, and the anchor's scenarios.

Scenario numbers refer to the mnemo-cortex suite listed in research/mnemo.md section 5.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support import SEALED_FIELDS, asset_path

from merkle_memory import canonical
from merkle_memory.errors import (
    LedgerBrokenError,
    LedgerError,
    LedgerFormatError,
    LedgerRollbackError,
)
from merkle_memory.ledger import (
    GENESIS,
    Entry,
    Head,
    Ledger,
    entry_hash,
    read_head,
    records,
    verify_ledger,
)
from merkle_memory.ledger.records import scan_records
from merkle_memory.ledger.tenant import Tenant


def anchor_canon(value: Any) -> bytes:
    """The anchor's canonical form, written out naively (research/mnemo.md section 1)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode("utf-8")


def anchor_hash(value: Any) -> str:
    return hashlib.sha256(anchor_canon(value)).hexdigest()


def anchor_content(record: dict[str, Any]) -> str:
    return anchor_hash({k: record.get(k) for k in SEALED_FIELDS})


def anchor_verify(path: Path) -> tuple[str, int | None]:
    """The anchor's chain walk (research/mnemo.md section 2), naive, for the chain state only."""
    expect, prev, broken = 1, GENESIS, None
    entries = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            continue
        entries += 1
        try:
            e = json.loads(line)
        except ValueError:
            broken = broken or expect
            continue
        if broken is None:
            if e.get("seq") != expect:
                broken = expect
            elif e.get("prev") != prev or e.get("hash") != anchor_hash(
                {k: v for k, v in e.items() if k != "hash"}
            ):
                broken = e["seq"]
        if isinstance(e.get("seq"), int):
            expect = e["seq"] + 1
        prev = e.get("hash")
    if entries == 0:
        return "empty", None
    return ("broken" if broken else "intact"), broken


def anchor_write(path: Path, records: list[dict[str, Any]], ts0: float = 1789851200.5) -> None:
    """Write a ledger the way the anchor did: json.dumps lines, float ts, insertion order."""
    prev = GENESIS
    with path.open("w", encoding="utf-8") as fh:
        for i, rec in enumerate(records, 1):
            e: dict[str, Any] = {
                "seq": i,
                "ts": ts0 + i * 1.25,
                "op": "save",
                "memory_id": rec["id"],
                "content_sha256": anchor_content(rec),
                "prev": prev,
            }
            e["hash"] = anchor_hash(e)
            prev = e["hash"]
            fh.write(json.dumps(e, ensure_ascii=False) + "\n")


def put(mem: Path, rec: dict[str, Any]) -> None:
    mem.mkdir(parents=True, exist_ok=True)
    (mem / f"{rec['id']}.json").write_text(json.dumps(rec), encoding="utf-8")


def rewrite(path: Path, **changes: Any) -> None:
    rec = json.loads(path.read_text(encoding="utf-8"))
    rec.update(changes)
    path.write_text(json.dumps(rec, indent=2), encoding="utf-8")


def make_tenant(tmp_path: Path, n: int) -> Tenant:
    t = Tenant(tmp_path / "t")
    for i in range(n):
        t.save({"id": f"m{i}", "summary": f"s{i}"})
    return t


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- vectors and both hash forms ----------------------------------------------------------


def test_writer_reproduces_library_written_lines(tmp_path: Path) -> None:
    """Given the vectors' seq, ts, op and records, the writer emits their lines byte for byte."""
    vec = json.loads(asset_path("mnemo", "ledger_vectors.json").read_text())
    led = Ledger(tmp_path / "ledger.jsonl")
    for item, want in zip(vec["records"], vec["entries"], strict=True):
        entry = led.append(
            item["record"]["id"],
            records.testimony(item["record"]),
            op="save",
            ts=_ts(vec, want["seq"]),
        )
        assert entry.seq == want["seq"]
        assert entry.hash == want["rfc8785_hash"]
    got = (tmp_path / "ledger.jsonl").read_bytes().decode("utf-8").split("\n")
    assert got == [*vec["library_written_lines"], ""]


def _ts(vec: dict[str, Any], seq: int) -> float:
    line = json.loads(vec["anchor_written_lines"][seq - 1])
    return float(line["ts"])


def test_testimony_vectors_both_forms() -> None:
    """Each vector record's testimony equals the published digest in both forms."""
    vec = json.loads(asset_path("mnemo", "ledger_vectors.json").read_text())
    assert tuple(vec["sealed_fields"]) == SEALED_FIELDS
    for item in vec["records"]:
        assert records.testimony(item["record"]) == item["content_sha256"]
        assert anchor_content(item["record"]) == item["content_sha256_anchor_form"]


def test_entry_preimages_match_vectors() -> None:
    """The RFC 8785 preimage and hash of each vector entry are exactly the published ones."""
    vec = json.loads(asset_path("mnemo", "ledger_vectors.json").read_text())
    for line, want in zip(vec["library_written_lines"], vec["entries"], strict=True):
        entry = Entry.from_dict(json.loads(line))
        assert canonical.dumps(entry.body()).decode() == want["rfc8785_preimage"]
        assert entry.line().decode() == line
        assert entry_hash(entry.to_dict()) == want["rfc8785_hash"]
    for line, want in zip(vec["anchor_written_lines"], vec["entries"], strict=True):
        body = {k: v for k, v in json.loads(line).items() if k != "hash"}
        assert anchor_canon(body).decode() == want["anchor_preimage"]


@pytest.mark.parametrize("which", ["anchor_written_lines", "library_written_lines"])
def test_vector_ledgers_verify_intact(tmp_path: Path, which: str) -> None:
    """Both the anchor's and this library's vector ledgers verify intact with 3 sealed."""
    vec = json.loads(asset_path("mnemo", "ledger_vectors.json").read_text())
    mem = tmp_path / "memory"
    for item in vec["records"]:
        put(mem, item["record"])
    write_lines(tmp_path / "ledger.jsonl", vec[which])
    rep = Tenant(tmp_path).verify()
    assert rep.to_dict() == {
        "ok": True,
        "chain": "intact",
        "entries": 3,
        "broken_at": None,
        "reason": None,
        "sealed": 3,
        "altered": [],
        "missing": [],
        "unsealed": [],
        "disputed": [],
    }


def test_anchor_format_ledger_verifies_and_continues(tmp_path: Path) -> None:
    """An anchor-written ledger (json.dumps lines, float ts, integral ts, non-ASCII) verifies
    intact here, and appending onto it keeps it intact under both verifiers."""
    recs = [
        {"id": "a", "summary": "café ✓", "key_facts": ["k"]},
        {"id": "b", "summary": "two", "timestamp": "2026-09-01T00:00:00+00:00"},
        {"id": "c", "summary": "𝄞 above U+FFFF", "tags": ["filing"]},
    ]
    for r in recs:
        put(tmp_path / "memory", r)
    anchor_write(tmp_path / "ledger.jsonl", recs, ts0=1789851199.5)  # ts 1789851200.75 ...
    lines = lines_of(tmp_path / "ledger.jsonl")
    assert '"ts": 1789851202.0' in lines[1]  # an integral float: the forms differ here
    t = Tenant(tmp_path)
    assert t.verify().chain == "intact" and t.verify().sealed == 3
    t.save({"id": "d", "summary": "ours"})
    rep = t.verify()
    assert (rep.chain, rep.sealed, rep.entries) == ("intact", 4, 4)
    assert anchor_verify(tmp_path / "ledger.jsonl") == ("intact", None)


def test_our_lines_verify_under_anchor_formulas(tmp_path: Path) -> None:
    """Lines this library writes (integral and fractional ts) pass the anchor's naive walk."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("x", "a" * 64, ts=1789851202.0)
    led.append("é ✓", "b" * 64, ts=1789851203.123456)
    led.append('q"uote\\', "c" * 64, op="adopt")
    assert anchor_verify(tmp_path / "ledger.jsonl") == ("intact", None)
    for raw in lines_of(tmp_path / "ledger.jsonl"):
        e = json.loads(raw)
        assert canonical.dumps(e).decode() == raw
        assert e["hash"] == anchor_hash({k: v for k, v in e.items() if k != "hash"})


def test_entry_create_and_round_trip() -> None:
    """Entry.create rounds ts to microseconds, hashes the RFC 8785 body, and round-trips."""
    e = Entry.create(1, 1700000000.12345678, "save", "m", "f" * 64, GENESIS)
    assert e.ts == 1700000000.123457
    assert e.hash == canonical.digest(e.body())
    assert Entry.from_dict(json.loads(e.line())) == e
    assert e.line() == canonical.dumps(e.to_dict())


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1, 1.0, "delete", "m", "f" * 64, GENESIS), "op"),
        ((1, 1.0, "save", "", "f" * 64, GENESIS), "memory_id"),
        ((1, 1.0, "save", "m", "F" * 64, GENESIS), "content_sha256"),
        ((1, float("nan"), "save", "m", "f" * 64, GENESIS), "ts"),
        ((0, 1.0, "save", "m", "f" * 64, GENESIS), "seq"),
        ((1, 1.0, "save", "m\x00", "f" * 64, GENESIS), "memory_id"),
    ],
)
def test_entry_create_rejects_bad_arguments(args: tuple[Any, ...], match: str) -> None:
    """Bad arguments raise LedgerFormatError naming the field."""
    with pytest.raises(LedgerFormatError, match=match):
        Entry.create(*args)


# --- the anchor's scenarios -----------------------------------------------------------------


def test_s01_fresh_store_is_empty_and_ok(tmp_path: Path) -> None:
    """Scenario 1: no ledger file gives chain empty, ok, 0 entries (a tenant with an empty
    memory/ folder, and the bare ledger function on a missing file)."""
    (tmp_path / "memory").mkdir()
    rep = Tenant(tmp_path).verify()
    assert (rep.chain, rep.ok, rep.entries, rep.broken_at) == ("empty", True, 0, None)
    rep = verify_ledger(tmp_path / "ledger.jsonl", {})
    assert (rep.chain, rep.ok, rep.entries, rep.broken_at) == ("empty", True, 0, None)


def test_s02_seal_chains_from_genesis(tmp_path: Path) -> None:
    """Scenario 2: seq 1 then 2, prev GENESIS then the previous hash; hash = entry_hash; the
    head names seq 2, the byte offset where its line ends (the file's size) and the file's
    fingerprint after that append."""
    led = Ledger(tmp_path / "ledger.jsonl")
    e1, e2 = led.append("a", "1" * 64), led.append("b", "2" * 64)
    assert (e1.seq, e1.prev, e2.seq, e2.prev) == (1, GENESIS, 2, e1.hash)
    assert e1.hash == entry_hash(e1.to_dict())
    st = (tmp_path / "ledger.jsonl").stat()
    assert st.st_size == len(e1.line()) + len(e2.line()) + 2
    fingerprint = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    body = {
        "counter": 2,
        "end": st.st_size,
        "fingerprint": fingerprint,
        "format": "ledger.head/2",
        "hash": e2.hash,
        "seq": 2,
    }
    line = canonical.dumps(body | {"check": hashlib.sha256(canonical.dumps(body)).hexdigest()})
    data = (tmp_path / "ledger.head").read_bytes()
    assert len(data) == 8192 and data[4096:] == line + b"\n" + bytes(4095 - len(line))
    assert read_head(tmp_path / "ledger.head") == Head(2, e2.hash, st.st_size, fingerprint)


def test_s03_reopened_ledger_continues_the_chain(tmp_path: Path) -> None:
    """Scenario 3: a new Ledger object continues seq and prev from the file."""
    e1 = Ledger(tmp_path / "ledger.jsonl").append("a", "1" * 64)
    e2 = Ledger(tmp_path / "ledger.jsonl").append("b", "2" * 64)
    assert (e2.seq, e2.prev) == (2, e1.hash)


def test_s05_edited_ledger_line_breaks_the_chain(tmp_path: Path) -> None:
    """Scenario 5: changing memory_id without rehashing breaks at 2, 'entry hash'."""
    t = make_tenant(tmp_path, 3)
    lines = lines_of(t.ledger.path)
    doctored = json.loads(lines[1])
    doctored["memory_id"] = "m9"
    lines[1] = json.dumps(doctored)
    write_lines(t.ledger.path, lines)
    rep = t.verify()
    assert (rep.chain, rep.broken_at, rep.ok) == ("broken", 2, False)
    assert rep.reason is not None and "entry hash" in rep.reason


def test_s06_dropped_ledger_line_breaks_the_chain(tmp_path: Path) -> None:
    """Scenario 6: deleting line 2 breaks at 2 with a sequence gap."""
    t = make_tenant(tmp_path, 3)
    lines = lines_of(t.ledger.path)
    del lines[1]
    write_lines(t.ledger.path, lines)
    rep = t.verify()
    assert (rep.chain, rep.broken_at) == ("broken", 2)
    assert rep.reason == "sequence gap: expected 2, found 3"


def test_s07_torn_final_line_is_quarantined_by_the_next_seal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Scenario 7: a fragment reads as a torn tail (not an entry, not a break, ok); the next
    append quarantines it, continues from the last good entry on disk, and the fragment's
    record reads unsealed."""
    t = Tenant(tmp_path)
    for rid, s in (("a", "one"), ("b", "two"), ("c", "three")):
        put(t.memory_dir, {"id": rid, "summary": s})
    e1 = t.ledger.append("a", records.testimony({"id": "a", "summary": "one"}))
    fragment = '{"seq": 2, "op": "save", "memory_id": "b"'
    with t.ledger.path.open("a", encoding="utf-8") as fh:
        fh.write(fragment)
    before = t.verify()
    size = t.ledger.path.stat().st_size
    assert (before.chain, before.entries, before.broken_at, before.ok) == ("intact", 1, None, True)
    assert before.torn_tail == (size - len(fragment), len(fragment))
    assert before.to_dict()["torn_tail"] == {"offset": size - len(fragment), "length": 41}
    with caplog.at_level(logging.WARNING, logger="merkle_memory.ledger"):
        e3 = Ledger(t.ledger.path).append("c", records.testimony({"id": "c", "summary": "three"}))
    assert "quarantining a torn tail" in caplog.text
    assert (e3.seq, e3.prev) == (2, e1.hash)
    lines = lines_of(t.ledger.path)
    assert len(lines) == 2 and json.loads(lines[1]) == e3.to_dict()
    torn = (tmp_path / "ledger.torn").read_text(encoding="utf-8")
    assert torn.startswith("# quarantined ")
    assert torn.split("\n")[0].endswith(f" from offset {len(lines[0]) + 1}")
    assert torn.split("\n")[1] == fragment
    rep = t.verify()
    assert (rep.chain, rep.entries, rep.sealed) == ("intact", 2, 2)
    assert rep.unsealed == ("b",) and rep.altered == ()


def test_s08_crash_fragment_does_not_brick_adoption(tmp_path: Path) -> None:
    """Scenario 8: seal adopts through a fragment (quarantine first); the chain is intact."""
    t = Tenant(tmp_path)
    t.save({"id": "a", "summary": "one"})
    with t.ledger.path.open("a", encoding="utf-8") as fh:
        fh.write('{"seq": 2, "op": "sa')
    put(t.memory_dir, {"id": "carried", "summary": "off a stick"})
    res = t.seal()
    assert res.sealed_ids == ("carried",)
    assert (res.report.chain, res.report.sealed, res.ok) == ("intact", 2, True)


def test_s09_bad_line_mid_file_stays_broken_and_is_not_quarantined(tmp_path: Path) -> None:
    """Scenario 9: junk in the middle is never repaired; seal is refused; no .torn."""
    t = make_tenant(tmp_path, 3)
    lines = lines_of(t.ledger.path)
    lines[1] = "not json at all"
    write_lines(t.ledger.path, lines)
    with pytest.raises(LedgerBrokenError) as info:
        t.seal()
    assert info.value.report.broken_at == 2
    assert not (tmp_path / "t" / "ledger.torn").exists()
    assert lines_of(t.ledger.path) == lines


def test_s10_invalid_entry_cannot_vouch_for_a_record(tmp_path: Path) -> None:
    """Scenario 10: a self-consistent rewrite of line 2 and junk re-claiming m0 are untrusted:
    broken at 3, disputed m1 and m2, altered m0, sealed 0."""
    t = make_tenant(tmp_path, 3)
    mem = t.memory_dir
    rewrite(mem / "m1.json", summary="forged")
    lines = lines_of(t.ledger.path)
    e = json.loads(lines[1])
    e["content_sha256"] = records.testimony(json.loads((mem / "m1.json").read_text()))
    e["hash"] = entry_hash(e)
    lines[1] = json.dumps(e)
    rewrite(mem / "m0.json", summary="also forged")
    junk = {
        "seq": 999,
        "ts": 0,
        "op": "save",
        "memory_id": "m0",
        "content_sha256": records.testimony(json.loads((mem / "m0.json").read_text())),
        "prev": "deadbeef",
        "hash": "nope",
    }
    lines.append(json.dumps(junk))
    write_lines(t.ledger.path, lines)
    rep = t.verify()
    assert (rep.chain, rep.broken_at) == ("broken", 3)
    assert rep.reason == "prev hash does not match the entry before it"
    assert rep.disputed == ("m1", "m2")
    assert rep.altered == ("m0",)
    assert (rep.sealed, rep.unsealed) == (0, ())


def test_s11_forgery_after_a_break_is_still_named_altered(tmp_path: Path) -> None:
    """Scenario 11: line of m1 deleted, m1 and m3 forged: altered m3, unsealed m1, disputed m2,
    sealed 1, entries 3; adoption refused and m1 not adopted."""
    t = make_tenant(tmp_path, 4)
    lines = lines_of(t.ledger.path)
    del lines[1]
    write_lines(t.ledger.path, lines)
    rewrite(t.memory_dir / "m1.json", summary="forged")
    rewrite(t.memory_dir / "m3.json", summary="also forged")
    rep = t.verify()
    assert (rep.chain, rep.broken_at) == ("broken", 2)
    assert (rep.altered, rep.unsealed, rep.disputed) == (("m3",), ("m1",), ("m2",))
    assert (rep.sealed, rep.entries) == (1, 3)
    with pytest.raises(LedgerBrokenError):
        t.seal()
    assert all(e.memory_id != "m1" for e in t.ledger.entries())


def test_s12_seal_adopts_but_never_launders(tmp_path: Path) -> None:
    """Scenario 12: a new record is adopted; an altered one stays altered on every rerun."""
    t = Tenant(tmp_path)
    t.save({"id": "good", "summary": "as written"})
    rewrite(t.memory_dir / "good.json", summary="rewritten")
    put(t.memory_dir, {"id": "new", "summary": "carried in"})
    res = t.seal()
    assert res.sealed_ids == ("new",)
    assert (res.report.altered, res.report.unsealed, res.report.sealed) == (("good",), (), 1)
    again = t.seal()
    assert again.sealed_ids == () and again.report.altered == ("good",)
    assert [e.op for e in t.ledger.entries()] == ["save", "adopt"]


def test_s13_two_ledger_objects_on_one_path_never_fork(tmp_path: Path) -> None:
    """Scenario 13 (rewritten): two Ledger objects on one path interleave into one chain."""
    path = tmp_path / "ledger.jsonl"
    a, b = Ledger(path), Ledger(path)
    got = [a.append("x1", "1" * 64), b.append("x2", "2" * 64), a.append("x3", "3" * 64)]
    got += b.append_many([("x4", "4" * 64), ("x5", "5" * 64)])
    assert [e.seq for e in got] == [1, 2, 3, 4, 5]
    assert [e.prev for e in got[1:]] == [e.hash for e in got[:-1]]
    assert verify_ledger(path, {}).chain == "intact"


def test_s27_replayed_low_seq_after_a_break_cannot_enter_the_prefix(tmp_path: Path) -> None:
    """Scenario 27: junk with seq 2 appended after 5 entries is untrusted: broken at 6, altered
    m0, sealed 4, disputed none."""
    t = make_tenant(tmp_path, 5)
    rewrite(t.memory_dir / "m0.json", summary="forged")
    junk = {
        "seq": 2,
        "op": "save",
        "memory_id": "m0",
        "content_sha256": records.testimony(json.loads((t.memory_dir / "m0.json").read_text())),
        "prev": "junk",
        "hash": "junk",
    }
    with t.ledger.path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(junk) + "\n")
    rep = t.verify()
    assert (rep.chain, rep.broken_at) == ("broken", 6)
    assert (rep.altered, rep.sealed, rep.disputed) == (("m0",), 4, ())


def test_s28_unterminated_but_complete_final_line_is_not_a_crash(tmp_path: Path) -> None:
    """Scenario 28: a stripped final newline is kept; next seal is seq 4; no .torn; intact."""
    t = make_tenant(tmp_path, 3)
    t.ledger.path.write_bytes(t.ledger.path.read_bytes().rstrip(b"\n"))
    e4 = t.save({"id": "m3", "summary": "s3"})
    assert e4.seq == 4
    assert not (tmp_path / "t" / "ledger.torn").exists()
    lines = lines_of(t.ledger.path)
    assert len(lines) == 4 and json.loads(lines[3]) == e4.to_dict()
    rep = t.verify()
    assert (rep.chain, rep.sealed, rep.ok) == ("intact", 4, True)


# --- strict lines ---------------------------------------------------------------------------


def _rehash(e: dict[str, Any]) -> str:
    e["hash"] = anchor_hash({k: v for k, v in e.items() if k != "hash"})
    return json.dumps(e)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e, s: _rehash({**e, "extra": 1}), "malformed entry: unexpected 'extra'"),
        (lambda e, s: _rehash({k: v for k, v in e.items() if k != "ts"}), "missing ts"),
        (lambda e, s: _rehash({**e, "seq": 2.0}), "seq is not a positive integer"),
        (lambda e, s: _rehash({**e, "seq": -2}), "seq is not a positive integer"),
        (lambda e, s: _rehash({**e, "seq": True}), "seq is not a positive integer"),
        (lambda e, s: _rehash({**e, "seq": 2**70}), "sequence gap: expected 2, found"),
        (lambda e, s: _rehash({**e, "op": "delete"}), "op is not save, adopt or forget"),
        (lambda e, s: s[:-1] + ',"seq":2}', "unparseable line"),
        (lambda e, s: s.replace('"ts":', '"ts":NaN,"x":'), "unparseable line"),
        (lambda e, s: "[1, 2]", "unparseable line"),
        (lambda e, s: s.replace("m1", "m\udcff1"), "unparseable line"),
    ],
)
def test_malformed_lines_break_the_chain_at_that_line(
    tmp_path: Path, mutate: Any, reason: str
) -> None:
    """Extra or missing keys, float/negative/bool/huge seq, duplicate keys, NaN, non-objects
    and invalid UTF-8 each break the chain at that line (never a crash); m0 stays sealed."""
    t = make_tenant(tmp_path, 3)
    lines = lines_of(t.ledger.path)
    new = mutate(json.loads(lines[1]), lines[1])
    data = "\n".join([lines[0], new, lines[2]]) + "\n"
    t.ledger.path.write_bytes(data.encode("utf-8", "surrogateescape"))
    rep = t.verify()
    assert (rep.chain, rep.broken_at) == ("broken", 2)
    assert rep.reason is not None and reason in rep.reason
    assert rep.sealed == 1 and "m0" not in rep.altered + rep.disputed
    with pytest.raises(LedgerBrokenError):
        t.seal()


def test_blank_lines_are_skipped_and_not_counted(tmp_path: Path) -> None:
    """Blank lines (as the anchor strips them) neither count as entries nor break the chain."""
    t = make_tenant(tmp_path, 2)
    lines = lines_of(t.ledger.path)
    write_lines(t.ledger.path, ["", lines[0], "   ", lines[1], ""])
    rep = t.verify()
    assert (rep.chain, rep.entries, rep.sealed) == ("intact", 2, 2)


# --- append mechanics, rollback, head ---------------------------------------------------------


def test_s23_emptied_ledger_under_a_live_writer_is_a_rollback(tmp_path: Path) -> None:
    """Scenario 23 (rewritten): emptying the ledger makes the next append fail with
    LedgerRollbackError, verify reports broken at 1, and no forged record is adopted."""
    t = make_tenant(tmp_path, 2)
    live = t.ledger
    t.ledger.path.write_bytes(b"")
    rewrite(t.memory_dir / "m0.json", summary="forged")
    with pytest.raises(LedgerRollbackError) as info:
        live.append("m9", "9" * 64)
    assert (info.value.expected_seq, info.value.found_seq) == (2, 0)
    rep = t.verify()
    assert (rep.chain, rep.broken_at, rep.entries) == ("broken", 1, 0)
    assert rep.reason is not None and "ledger.head records a later entry" in rep.reason
    with pytest.raises(LedgerRollbackError):
        t.seal()
    assert t.ledger.path.read_bytes() == b""


def test_truncated_ledger_is_a_rollback_and_keeps_earlier_trust(tmp_path: Path) -> None:
    """A ledger cut back by whole lines: append refused, verify broken at the first missing seq,
    entries still present stay trusted (sealed) and the lost one reads unsealed."""
    t = make_tenant(tmp_path, 3)
    lines = lines_of(t.ledger.path)
    write_lines(t.ledger.path, lines[:2])
    with pytest.raises(LedgerRollbackError):
        Ledger(t.ledger.path).append("x", "1" * 64)
    rep = t.verify()
    assert (rep.chain, rep.broken_at, rep.sealed, rep.unsealed) == ("broken", 3, 2, ("m2",))


def test_rollback_without_head_caught_by_the_live_object(tmp_path: Path) -> None:
    """With ledger.head deleted too, the object that wrote the entries still refuses."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("a", "1" * 64)
    led.append("b", "2" * 64)
    (tmp_path / "ledger.jsonl").write_bytes(b"")
    (tmp_path / "ledger.head").unlink()
    with pytest.raises(LedgerRollbackError, match="last append"):
        led.append("c", "3" * 64)


def test_restored_older_copy_with_same_length_is_refused(tmp_path: Path) -> None:
    """A file replaced by a different chain of the same length disagrees with the head."""
    path = tmp_path / "ledger.jsonl"
    Ledger(path).append("a", "1" * 64)
    head = (tmp_path / "ledger.head").read_bytes()
    path.unlink()
    (tmp_path / "ledger.head").unlink()
    Ledger(path).append("forged", "2" * 64)
    (tmp_path / "ledger.head").write_bytes(head)
    with pytest.raises(LedgerRollbackError, match="different entry"):
        Ledger(path).append("b", "3" * 64)
    rep = verify_ledger(path, {})
    assert (rep.chain, rep.broken_at) == ("broken", 1)
    assert rep.reason == "ledger.head records a different entry at seq 1"


def test_head_behind_file_is_harmless(tmp_path: Path) -> None:
    """A crash between the append and the head update (head one behind) verifies intact and
    the next append continues."""
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    led.append("a", "1" * 64)
    head = (tmp_path / "ledger.head").read_bytes()
    led.append("b", "2" * 64)
    (tmp_path / "ledger.head").write_bytes(head)
    assert verify_ledger(path, {}).chain == "intact"
    assert Ledger(path).append("c", "3" * 64).seq == 3


def test_unreadable_head_refuses_append_and_breaks_verify(tmp_path: Path) -> None:
    """A corrupt ledger.head is never guessed around."""
    path = tmp_path / "ledger.jsonl"
    Ledger(path).append("a", "1" * 64)
    (tmp_path / "ledger.head").write_text("{oops", encoding="utf-8")
    with pytest.raises(LedgerFormatError, match=r"ledger\.head"):
        Ledger(path).append("b", "2" * 64)
    rep = verify_ledger(path, {})
    assert (rep.chain, rep.broken_at) == ("broken", 2)


def test_bad_last_line_refuses_append(tmp_path: Path) -> None:
    """A complete but invalid last line is never chained onto."""
    path = tmp_path / "ledger.jsonl"
    Ledger(path).append("a", "1" * 64)
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"seq": 2}\n')
    size = path.stat().st_size
    with pytest.raises(LedgerBrokenError, match="last line"):
        Ledger(path).append("b", "2" * 64)
    assert path.stat().st_size == size


def test_fragment_cut_inside_utf8_and_file_without_newline(tmp_path: Path) -> None:
    """A fragment cut inside a multi-byte character, in a file with no newline at all, is a
    torn tail at offset 0 (the chain empty), quarantined whole; the chain restarts at seq 1."""
    path = tmp_path / "ledger.jsonl"
    raw = Entry.create(1, 5.5, "save", "é✓", "1" * 64, GENESIS).line()
    cut = raw.index("✓".encode()) + 1
    path.write_bytes(raw[:cut])
    rep = verify_ledger(path, {})
    assert (rep.chain, rep.entries, rep.reason, rep.torn_tail) == ("empty", 0, None, (0, cut))
    e = Ledger(path).append("b", "2" * 64)
    assert e.seq == 1 and e.prev == GENESIS
    torn = (tmp_path / "ledger.torn").read_bytes()
    assert torn.endswith(raw[:cut] + b"\n") and b"from offset 0" in torn


def test_verify_changes_no_file(tmp_path: Path) -> None:
    """Verify over a torn, broken tenant leaves every byte and file as it was."""
    t = make_tenant(tmp_path, 3)
    with t.ledger.path.open("ab") as fh:
        fh.write(b'{"seq": 4')
    before = {p: p.read_bytes() for p in (tmp_path / "t").rglob("*") if p.is_file()}
    t.verify()
    after = {p: p.read_bytes() for p in (tmp_path / "t").rglob("*") if p.is_file()}
    assert after == before


def test_on_append_hook_runs_under_the_lock(tmp_path: Path) -> None:
    """The hook gets the new entries after ledger.head is durable, and can append more under
    the same lock through locked()."""
    seen: list[tuple[int, ...]] = []
    path = tmp_path / "ledger.jsonl"

    def hook(entries: Any) -> None:
        head = read_head(tmp_path / "ledger.head")
        assert head is not None and head.seq == entries[-1].seq
        seen.append(tuple(e.seq for e in entries))

    led = Ledger(path, on_append=hook)
    led.append("a", "1" * 64)
    led.append_many([("b", "2" * 64), ("c", "3" * 64)])
    with led.locked():
        led.append("d", "4" * 64)
        (tmp_path / "sidecar").write_bytes(b"x")
    assert seen == [(1,), (2, 3), (4,)]
    assert led.append_many([]) == []


def test_entries_streams_and_rejects_bad_lines(tmp_path: Path) -> None:
    """entries() yields parsed entries in order, ignores a torn fragment, and names a bad line."""
    led = Ledger(tmp_path / "ledger.jsonl")
    made = led.append_many([("a", "1" * 64), ("b", "2" * 64)])
    with led.path.open("ab") as fh:
        fh.write(b'{"seq":')
    assert list(led.entries(check_hash=True)) == made
    assert led.last() == made[-1]
    with led.path.open("ab") as fh:
        fh.write(b'\n{"seq": 3}\n')
    with pytest.raises(LedgerFormatError, match="line 3"):
        list(led.entries())


def test_records_unparseable_and_duplicate_ids(tmp_path: Path) -> None:
    """An unparseable record never reads as sealed; a second file claiming an id is ignored
    when ``<id>.json`` itself is intact (it speaks for the id), and makes the id match
    nothing when no claimant is named ``<id>.json``."""
    t = make_tenant(tmp_path, 2)
    (t.memory_dir / "m0.json").write_text('{"id": "m0", "id": "m0", "summary": "s0"}')
    (t.memory_dir / "copy.json").write_text(json.dumps({"id": "m1", "summary": "other"}))
    rep = t.verify()
    assert rep.altered == ("m0",) and rep.sealed == 1
    assert scan_records(t.memory_dir)["m0"].forms == ()
    (t.memory_dir / "m1.json").rename(t.memory_dir / "elsewhere.json")
    rep = t.verify()
    assert rep.altered == ("m0", "m1") and rep.sealed == 0


@pytest.mark.parametrize("bad", [None, 5, b"ledger.jsonl", "", ["x"]])
def test_bad_path_arguments_raise_ledger_errors(tmp_path: Path, bad: object) -> None:
    """A ledger, head or verify path that is not a non-empty str/path is a LedgerError,
    never a raw TypeError or ValueError."""
    with pytest.raises(LedgerError, match="is a non-empty str or path"):
        Ledger(bad)  # type: ignore[arg-type]
    with pytest.raises(LedgerError):
        verify_ledger(bad, {})  # type: ignore[arg-type]
    with pytest.raises(LedgerError):
        read_head(bad)  # type: ignore[arg-type]


def test_bad_append_arguments_write_nothing(tmp_path: Path) -> None:
    """An unhashable op, items that are not pairs, or a non-iterable raise LedgerFormatError
    before anything is written."""
    led = Ledger(tmp_path / "ledger.jsonl")
    for call in (
        lambda: led.append("m", "0" * 64, op=["save"]),  # type: ignore[arg-type]
        lambda: led.append_many(5),  # type: ignore[arg-type]
        lambda: led.append_many(["ab"]),  # type: ignore[list-item]
        lambda: led.append_many([("m", "0" * 64, "x")]),  # type: ignore[list-item]
    ):
        with pytest.raises(LedgerFormatError):
            call()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LedgerFormatError):
        entry_hash(["seq"])  # type: ignore[arg-type]


def test_verify_ledger_refuses_a_non_mapping_and_ignores_bad_values(tmp_path: Path) -> None:
    """testimony that is not a mapping (or a function returning one) is a LedgerError; a value
    that is no digest (None, a number) never matches: the record reads altered."""
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("m", "0" * 64)
    for bad in (None, ["m"], lambda: ["m"]):
        with pytest.raises(LedgerError):
            verify_ledger(led.path, bad)  # type: ignore[arg-type]
    for value in (None, 5, {"a": 1}):
        rep = verify_ledger(led.path, {"m": value})  # type: ignore[dict-item]
        assert (rep.altered, rep.ok) == (("m",), False)


def test_a_deleted_sealed_record_reads_missing(tmp_path: Path) -> None:
    """A record whose file is deleted after it was sealed is named ``missing`` (not ok), the
    others stay sealed; ``seal`` never re-adopts it."""
    tenant = Tenant(tmp_path)
    for rid in ("a", "b", "c"):
        tenant.save({"id": rid, "summary": rid})
    (tmp_path / "memory" / "b.json").unlink()
    rep = tenant.verify()
    assert (rep.ok, rep.chain, rep.sealed, rep.missing, rep.altered) == (
        False,
        "intact",
        2,
        ("b",),
        (),
    )
    sealed = tenant.seal()
    assert (sealed.sealed_ids, sealed.report.missing) == ((), ("b",))
