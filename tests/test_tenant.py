"""Tenant: save, seal/adopt, verify verdicts (scenarios 15-18, 20) and discovery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from merkle_memory.errors import LedgerError, RecordError
from merkle_memory.tenant import Tenant, discover_tenants, is_tenant_name


def rewrite(path: Path, **changes: object) -> None:
    rec = json.loads(path.read_text(encoding="utf-8"))
    rec.update(changes)
    path.write_text(json.dumps(rec), encoding="utf-8")


def test_save_writes_record_then_seals(tmp_path: Path) -> None:
    """save writes memory/<id>.json and a 'save' entry; verify reports it sealed."""
    t = Tenant(tmp_path / "agents" / "cc")
    e = t.save({"id": "m1", "session_id": "s", "summary": "we decided"})
    assert (e.seq, e.op, e.memory_id) == (1, "save", "m1")
    assert json.loads((t.memory_dir / "m1.json").read_text())["summary"] == "we decided"
    rep = t.verify().to_dict()
    assert rep["ok"] and rep["sealed"] == 1 and rep["entries"] == 1 and t.name == "cc"


def test_s15_altered_summary_is_named(tmp_path: Path) -> None:
    """Scenario 15: an edited summary is named altered and the report is not ok."""
    t = Tenant(tmp_path)
    t.save({"id": "m1", "summary": "what was said"})
    rewrite(t.memory_dir / "m1.json", summary="what somebody wishes")
    rep = t.verify()
    assert rep.altered == ("m1",) and not rep.ok


def test_s16_filing_change_keeps_the_seal(tmp_path: Path) -> None:
    """Scenario 16: filing fields change freely."""
    t = Tenant(tmp_path)
    t.save({"id": "m1", "summary": "reclassify me"})
    rewrite(t.memory_dir / "m1.json", category="doctrine", needs_reclassification=True)
    rep = t.verify()
    assert rep.ok and rep.sealed == 1 and rep.altered == ()


def test_s17_supersede_keeps_both_seals(tmp_path: Path) -> None:
    """Scenario 17: marking the old record superseded_by the new one keeps both sealed."""
    t = Tenant(tmp_path)
    t.save({"id": "old", "summary": "the old truth"})
    t.save({"id": "new", "summary": "the new truth"})
    rewrite(t.memory_dir / "old.json", superseded_by="new")
    rep = t.verify()
    assert rep.ok and rep.sealed == 2


def test_s18_missing_sealed_file_is_named(tmp_path: Path) -> None:
    """Scenario 18: a deleted sealed file is named missing."""
    t = Tenant(tmp_path)
    t.save({"id": "m1", "summary": "soon to vanish"})
    (t.memory_dir / "m1.json").unlink()
    rep = t.verify()
    assert rep.missing == ("m1",) and not rep.ok


def test_s20_tenants_have_separate_chains(tmp_path: Path) -> None:
    """Scenario 20: two tenants, two ledgers, one entry each."""
    cc, rocky = Tenant(tmp_path / "agents" / "cc"), Tenant(tmp_path / "agents" / "rocky")
    cc.save({"id": "a", "summary": "cc's"})
    rocky.save({"id": "b", "summary": "rocky's"})
    assert cc.verify().entries == 1 and rocky.verify().entries == 1
    assert (tmp_path / "agents" / "cc" / "ledger.jsonl").exists()
    assert (tmp_path / "agents" / "rocky" / "ledger.jsonl").exists()


def test_seal_adopts_sorted_and_reports(tmp_path: Path) -> None:
    """Scenario 19 in library form: unsealed is not a failure; seal adopts in sorted order."""
    t = Tenant(tmp_path)
    t.save({"id": "born", "summary": "here"})
    for rid in ("zz", "aa"):
        (t.memory_dir / f"{rid}.json").write_text(json.dumps({"id": rid, "summary": rid}))
    before = t.verify()
    assert before.unsealed == ("aa", "zz") and before.ok
    res = t.seal()
    assert res.sealed_ids == ("aa", "zz") and res.sealed_now == 2
    d = res.to_dict()
    assert (d["sealed_now"], d["sealed_ids"], d["sealed"], d["unsealed"]) == (
        2,
        ["aa", "zz"],
        3,
        [],
    )
    assert [e.op for e in t.ledger.entries()] == ["save", "adopt", "adopt"]


def test_seal_skips_unsealable_records(tmp_path: Path) -> None:
    """Records outside RFC 8785 or unparseable stay unsealed and are listed as skipped."""
    t = Tenant(tmp_path)
    t.memory_dir.mkdir()
    (t.memory_dir / "big.json").write_text(json.dumps({"id": "big", "summary": 2**60}))
    (t.memory_dir / "bad.json").write_text("{")
    res = t.seal()
    assert res.sealed_ids == () and res.skipped == ("bad", "big")
    assert res.report.unsealed == ("bad", "big")


def test_seal_writes_head_for_an_anchor_ledger(tmp_path: Path) -> None:
    """Sealing a headless ledger records its tip in ledger.head."""
    t = Tenant(tmp_path)
    t.save({"id": "a", "summary": "x"})
    (tmp_path / "ledger.head").unlink()
    t.seal()
    assert json.loads((tmp_path / "ledger.head").read_text())["seq"] == 1


def test_save_refuses_bad_records(tmp_path: Path) -> None:
    """A bad id or a non-canonical value writes nothing."""
    t = Tenant(tmp_path)
    with pytest.raises(RecordError):
        t.save({"id": "../escape", "summary": "x"})
    with pytest.raises(RecordError):
        t.save({"id": "ok", "summary": 2**60})
    assert not t.memory_dir.exists() or list(t.memory_dir.iterdir()) == []


def test_seal_on_missing_folder_is_refused(tmp_path: Path) -> None:
    """Sealing a folder that does not exist creates nothing."""
    with pytest.raises(LedgerError):
        Tenant(tmp_path / "nope").seal()
    assert not (tmp_path / "nope").exists()


def test_discovery_and_names(tmp_path: Path) -> None:
    """--all discovery: valid names are tenants (sorted), others skipped, files ignored."""
    for name in ("rocky", "cc", "rocky.archived-2026-01", "_doctor", "a" * 65):
        (tmp_path / "agents" / name).mkdir(parents=True)
    (tmp_path / "agents" / "file.txt").write_text("x")
    tenants, skipped = discover_tenants(tmp_path)
    assert [p.name for p in tenants] == ["cc", "rocky"]
    assert sorted(skipped) == sorted(["rocky.archived-2026-01", "_doctor", "a" * 65])
    assert discover_tenants(tmp_path / "none") == ([], [])
    assert is_tenant_name("A-b_9") and not is_tenant_name("-a") and not is_tenant_name("a.b")
