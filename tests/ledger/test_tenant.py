"""Tenant: save, seal/adopt, verify verdicts (scenarios 15-18, 20) and discovery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from merkle_memory.errors import LedgerError, RecordError, TenantError
from merkle_memory.ledger import read_head, records
from merkle_memory.ledger.settings import write_testimony_mode
from merkle_memory.ledger.tenant import Tenant, discover_tenants, is_tenant_name


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
    head = read_head(tmp_path / "ledger.head")
    size = (tmp_path / "ledger.jsonl").stat().st_size
    assert head is not None and (head.seq, head.end) == (1, size)


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


# --- what is a tenant (fault 1) -----------------------------------------------------------

NOT_A_TENANT = "not a tenant folder (no memory/ and no ledger.jsonl)"


def test_verify_and_seal_refuse_a_folder_that_is_not_a_tenant(tmp_path: Path) -> None:
    """A folder with neither memory/ nor ledger.jsonl: verify and seal raise TenantError
    (a LedgerError) with the exact reason, and seal writes nothing there."""
    (tmp_path / "sub").mkdir()
    for action in (Tenant(tmp_path).verify, Tenant(tmp_path).seal):
        with pytest.raises(TenantError) as caught:
            action()
        assert isinstance(caught.value, LedgerError)
        assert (caught.value.reason, caught.value.path) == (NOT_A_TENANT, str(tmp_path))
        assert str(caught.value) == f"{tmp_path}: {NOT_A_TENANT}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ("memory-file", NOT_A_TENANT),
        ("memory-file+ledger", "memory is not a folder"),
        ("root-file", "not a tenant folder (not a folder)"),
        ("missing", "not a tenant folder (no such folder)"),
    ],
)
def test_verify_refuses_odd_layouts(tmp_path: Path, layout: str, reason: str) -> None:
    """A `memory` that is a file, a tenant path that is a file or missing: TenantError with
    the exact reason, never a raw NotADirectoryError, never an ok report."""
    root = tmp_path / "t"
    if layout == "root-file":
        root.write_text("{}")
    elif layout != "missing":
        root.mkdir()
        (root / "memory").write_text("x")
        if layout.endswith("+ledger"):
            (root / "ledger.jsonl").write_bytes(b"")
    with pytest.raises(TenantError) as caught:
        Tenant(root).verify()
    assert caught.value.reason == reason


def test_ledger_only_and_memory_only_folders_are_tenants(tmp_path: Path) -> None:
    """A folder with only ledger.jsonl, or only an empty memory/, verifies (chain empty)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ledger.jsonl").write_bytes(b"")
    (tmp_path / "b" / "memory").mkdir(parents=True)
    for name in ("a", "b"):
        rep = Tenant(tmp_path / name).verify()
        assert (rep.ok, rep.chain, rep.entries) == (True, "empty", 0)


def test_save_on_an_empty_or_missing_folder_creates_the_tenant(tmp_path: Path) -> None:
    """save is how a tenant starts: on an empty folder and on a missing one."""
    (tmp_path / "empty").mkdir()
    for name in ("empty", "missing"):
        t = Tenant(tmp_path / name)
        assert t.save({"id": "first", "summary": "hello"}).seq == 1
        assert t.verify().sealed == 1


def test_first_save_makes_the_folder_whole_in_one_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing tenant appears with its memory/ at once: a save killed right after (here:
    the ledger lock fails) leaves a folder that verifies as an empty tenant, never one that
    is "not a tenant folder"."""
    import merkle_memory.ledger._folder as folder

    def no_lock(*_args: object, **_kw: object) -> object:
        raise OSError(5, "simulated crash")

    monkeypatch.setattr(folder.FolderLedgerStore, "_lock", no_lock)
    t = Tenant(tmp_path / "a" / "b")
    with pytest.raises(OSError, match="simulated crash"):
        t.save({"id": "first", "summary": "hello"})
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["memory"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]  # no temp left
    monkeypatch.undo()
    rep = t.verify()
    assert (rep.ok, rep.entries, rep.sealed) == (True, 0, 0)


# --- bad argument types (fault 2) ---------------------------------------------------------


@pytest.mark.parametrize("record", [["x"], "x", None, 5, {1: "a", "id": "k"}])
def test_save_refuses_a_non_record_with_record_error(tmp_path: Path, record: object) -> None:
    """save of a list, str, None, int or a mapping with a non-str key raises RecordError and
    writes nothing."""
    t = Tenant(tmp_path)
    with pytest.raises(RecordError):
        t.save(record)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_constructor_refuses_bad_argument_types(tmp_path: Path) -> None:
    """A root that is no path is a TenantError; sealed_fields that is one string or holds
    non-strings is a RecordError (it would otherwise seal single letters)."""
    with pytest.raises(TenantError):
        Tenant(5)  # type: ignore[arg-type]
    with pytest.raises(TenantError):
        Tenant(None)  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        Tenant(tmp_path, sealed_fields="summary")
    with pytest.raises(RecordError):
        Tenant(tmp_path, sealed_fields=["id", 3])  # type: ignore[list-item]
    with pytest.raises(RecordError):
        Tenant(tmp_path, sealed_fields=5)  # type: ignore[arg-type]
    assert Tenant(tmp_path, sealed_fields=["id", "summary"]).sealed_fields == ("id", "summary")


# --- symbolic links (fault 3) -------------------------------------------------------------


def test_symlinked_record_is_never_read(tmp_path: Path) -> None:
    """A sealed record replaced by a symlink to an identical file elsewhere reads altered; an
    unsealed symlinked record is skipped by seal with its reason and stays unsealed."""
    t = Tenant(tmp_path / "t")
    t.save({"id": "a", "summary": "true"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.json").write_bytes((t.memory_dir / "a.json").read_bytes())
    (outside / "b.json").write_text(json.dumps({"id": "b", "summary": "planted"}))
    (t.memory_dir / "a.json").unlink()
    (t.memory_dir / "a.json").symlink_to(outside / "a.json")
    (t.memory_dir / "b.json").symlink_to(outside / "b.json")
    rep = t.verify()
    assert (rep.ok, rep.altered, rep.unsealed, rep.sealed) == (False, ("a",), ("b",), 0)
    res = t.seal()
    assert res.sealed_ids == () and res.skipped == ("b",)
    assert res.skip_reasons == (("b", "a symbolic link (never followed)"),)
    assert [e.memory_id for e in t.ledger.entries()] == ["a"]


def test_symlinked_memory_folder_is_refused(tmp_path: Path) -> None:
    """memory/ as a symlink: verify, seal and save raise TenantError; nothing is written
    through the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_text('{"id": "x", "summary": "planted"}')
    root = tmp_path / "t"
    root.mkdir()
    (root / "memory").symlink_to(outside)
    t = Tenant(root)
    for action in (t.verify, t.seal, lambda: t.save({"id": "y"})):
        with pytest.raises(TenantError) as caught:
            action()
        assert caught.value.reason == "memory/ is a symbolic link (never followed)"
    assert sorted(p.name for p in outside.iterdir()) == ["x.json"]
    assert sorted(p.name for p in root.iterdir()) == ["memory"]


# --- a save is an event (fault 8, documented) ----------------------------------------------


def test_identical_saves_append_an_entry_each(tmp_path: Path) -> None:
    """Saving the same record twice appends two `save` entries (mnemo's semantics: a save is
    an event); the record reads sealed once."""
    t = Tenant(tmp_path)
    record = {"id": "same", "summary": "unchanged"}
    first, second = t.save(record), t.save(record)
    assert (first.seq, second.seq) == (1, 2)
    assert first.content_sha256 == second.content_sha256
    rep = t.verify()
    assert (rep.entries, rep.sealed, rep.ok) == (2, 1, True)


# --- the save path's shortcuts (issue 15 item 2) ------------------------------------------------


def test_a_mode_recorded_by_another_writer_between_saves_is_used(tmp_path: Path) -> None:
    """A Tenant remembers the mode it last wrote with and the ``testimony.json`` it read,
    but checks the file again under the lock at every save: a mode another writer records
    in between (a new file, then a replaced one) is the one the next save seals with."""
    root = tmp_path / "t"
    tenant = Tenant(root)
    rec = {"id": "a", "key_facts": [1.0]}
    rfc = records.record_to_seal(rec, mode="rfc8785")[1]
    mnemo = records.record_to_seal(rec, mode="mnemo")[1]
    assert rfc != mnemo
    assert tenant.save(rec).content_sha256 == rfc
    Tenant(root, testimony="mnemo").save({"id": "b", "summary": "x"})
    assert tenant.save(rec).content_sha256 == mnemo
    write_testimony_mode(root, "rfc8785")  # replaced whole: another inode
    assert tenant.save(rec).content_sha256 == rfc
    assert tenant.testimony_mode == "rfc8785"
    assert tenant.verify().ok


def test_a_memory_folder_removed_after_it_was_looked_at_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memory/`` seen as a folder before the lock but gone when the record is written (a
    race with another process): the folder is made again (durably) and the save completes."""
    tenant = Tenant(tmp_path / "t")
    tenant.initialize()
    (tenant.memory_dir).rmdir()
    monkeypatch.setattr(Tenant, "_layout", lambda self, creating: (True, True))
    entry = tenant.save({"id": "a", "summary": "s"})
    monkeypatch.undo()
    assert entry.seq == 1
    assert json.loads((tenant.memory_dir / "a.json").read_text()) == {"id": "a", "summary": "s"}
    report = tenant.verify()
    assert (report.ok, report.sealed) == (True, 1)
