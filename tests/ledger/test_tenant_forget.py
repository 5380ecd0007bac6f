"""Forgetting with proof (issue 20): ``Tenant.forget``, tombstones, the verdicts ``forgotten``
and ``reappeared``, receipts that verify against a later checkpoint, crash safety at every step,
and what mnemo-cortex's own verifier makes of an ``op: "forget"`` entry."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Crash, Recorder, mnemo_canonical, mnemo_verify

from merkle_memory import canonical
from merkle_memory.checkpoint import open_checkpoint, sign_checkpoint
from merkle_memory.errors import LedgerBrokenError, LedgerFormatError, RecordError
from merkle_memory.ledger import Tenant, verify_ledger
from merkle_memory.ledger.proofs import prove_consistency, prove_inclusion, tree_head
from merkle_memory.ledger.tombstones import TOMBSTONE_SCHEMA, Tombstone
from merkle_memory.proof import verify_consistency
from merkle_memory.signed_note import HmacKey

KEY = HmacKey("log.example/t", bytes(range(32)))


def _tenant(tmp_path: Path, **kw: str) -> Tenant:
    tenant = Tenant(tmp_path / "t", **kw)  # type: ignore[arg-type]
    tenant.save({"id": "x", "summary": "my card ends in 4242"})
    tenant.save({"id": "y", "summary": "we chose sqlite"})
    return tenant


def _lines(tenant: Tenant) -> list[dict[str, object]]:
    text = (tenant.root / "ledger.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_forget_removes_the_file_and_verify_says_forgotten(tmp_path: Path) -> None:
    """After forget the record file is gone, the ledger ends with a ``forget`` entry whose
    ``content_sha256`` is the tombstone's digest, the tombstone retires the digest the save
    sealed, and verify reports ``forgotten`` with ``ok`` true and the chain intact."""
    tenant = _tenant(tmp_path)
    sealed_digest = _lines(tenant)[0]["content_sha256"]
    receipt = tenant.forget("x", "user asked")
    assert not (tenant.memory_dir / "x.json").exists()
    last = _lines(tenant)[-1]
    assert (last["seq"], last["op"], last["memory_id"]) == (3, "forget", "x")
    tomb = receipt.tombstone
    assert tomb is not None
    assert (tomb.memory_id, tomb.reason, tomb.retires) == ("x", "user asked", sealed_digest)
    assert last["content_sha256"] == tomb.digest() == receipt.entry.content_sha256
    assert (receipt.removed, receipt.already_forgotten) == (True, False)
    stored = (tenant.root / "forgotten" / "x.json").read_bytes()
    assert stored == canonical.dumps(tomb.body()) + b"\n"
    assert Tombstone.from_bytes(stored) == tomb == tenant.tombstone("x")
    report = tenant.verify()
    assert report.to_dict() == {
        "ok": True,
        "chain": "intact",
        "entries": 3,
        "broken_at": None,
        "reason": None,
        "sealed": 1,
        "altered": [],
        "missing": [],
        "unsealed": [],
        "disputed": [],
        "forgotten": ["x"],
    }
    assert sorted(p.name for p in (tenant.root / "forgotten").iterdir()) == ["x.json"]


def test_tombstone_digest_is_the_same_in_both_hash_forms(tmp_path: Path) -> None:
    """The tombstone holds only strings, so its RFC 8785 bytes equal the anchor's form (a
    reason with an astral character, a control character, U+2028 and a quote included)."""
    tenant = _tenant(tmp_path)
    tomb = tenant.forget("x", 'user 😀 asked\x01\u2028"').tombstone
    assert tomb is not None
    body = tomb.body()
    assert canonical.dumps(body) == mnemo_canonical(body)
    assert tomb.digest() == hashlib.sha256(mnemo_canonical(body)).hexdigest()
    assert body["schema"] == TOMBSTONE_SCHEMA


def test_restored_file_is_reported_reappeared_and_forgetting_again_removes_it(
    tmp_path: Path,
) -> None:
    """A forgotten record whose file is put back (from a backup) reads ``reappeared`` and
    ``ok`` is false; forgetting it again appends nothing, removes the file and returns the
    first receipt's tombstone."""
    tenant = _tenant(tmp_path)
    backup = (tenant.memory_dir / "x.json").read_bytes()
    first = tenant.forget("x", "user asked")
    (tenant.memory_dir / "x.json").write_bytes(backup)
    report = tenant.verify()
    assert (report.ok, report.reappeared, report.forgotten, report.sealed) == (
        False,
        ("x",),
        (),
        1,
    )
    assert report.to_dict()["reappeared"] == ["x"]
    again = tenant.forget("x", "another reason")
    assert (again.already_forgotten, again.removed) == (True, True)
    assert again.entry == first.entry and again.tombstone == first.tombstone
    assert len(_lines(tenant)) == 3
    assert tenant.verify().forgotten == ("x",)
    assert tenant.verify().ok


def test_seal_never_adopts_a_reappeared_record(tmp_path: Path) -> None:
    """``seal`` adopts only ids with no entry: a reappeared record keeps its verdict."""
    tenant = _tenant(tmp_path)
    backup = (tenant.memory_dir / "x.json").read_bytes()
    tenant.forget("x", "r")
    (tenant.memory_dir / "x.json").write_bytes(backup)
    result = tenant.seal()
    assert (result.sealed_ids, result.report.reappeared, result.ok) == ((), ("x",), False)


def test_saving_a_forgotten_id_again_seals_the_new_record(tmp_path: Path) -> None:
    """A forgotten id may be saved again: the latest entry is a save, the record reads
    ``sealed``, and the tombstone file stays as history."""
    tenant = _tenant(tmp_path)
    tenant.forget("x", "r")
    tenant.save({"id": "x", "summary": "new content"})
    report = tenant.verify()
    assert (report.ok, report.sealed, report.forgotten) == (True, 2, ())
    assert (tenant.root / "forgotten" / "x.json").exists()


def test_a_proof_of_the_tombstone_verifies_against_a_later_checkpoint(tmp_path: Path) -> None:
    """The receipt: the forget entry is proven included in a signed checkpoint taken after
    it, and that checkpoint is proven consistent with one taken when the forget happened."""
    tenant = _tenant(tmp_path)
    receipt = tenant.forget("x", "user asked")
    at_forget = tree_head(tenant.ledger, "log.example/t")
    tenant.save({"id": "z", "summary": "later"})
    note = sign_checkpoint(tree_head(tenant.ledger, "log.example/t"), [KEY])
    later = open_checkpoint(note, [KEY], origin="log.example/t")
    proof = prove_inclusion(tenant.ledger, "x")
    assert proof.entry == receipt.entry and (proof.leaf_index, proof.tree_size) == (2, 4)
    assert later.size == 4
    proof.check_entry()
    proof.verify(later.root)
    consistency = prove_consistency(tenant.ledger, at_forget.size)
    verify_consistency(
        at_forget.size, later.size, consistency.consistency_proof, at_forget.root, later.root
    )
    assert receipt.tombstone is not None
    assert proof.entry.content_sha256 == receipt.tombstone.digest()


def test_untrusted_forget_is_disputed_and_never_overrules_a_trusted_save(tmp_path: Path) -> None:
    """A forget entry past a break cannot vouch for the absence of a file: an id known only
    past the break reads ``disputed``; an id whose save is trusted reads ``missing`` (a
    trusted verdict is never overruled by an untrusted entry)."""
    tenant = _tenant(tmp_path)
    tenant.save({"id": "z", "summary": "z"})
    tenant.forget("z", "r")
    tenant.forget("x", "r")
    path = tenant.root / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], *lines[2:]]))  # seq 2 dropped: 3.. are untrusted
    report = tenant.verify()
    assert (report.chain, report.broken_at, report.reason) == (
        "broken",
        2,
        "sequence gap: expected 2, found 3",
    )
    assert (report.disputed, report.missing, report.forgotten, report.unsealed) == (
        ("z",),
        ("x",),
        (),
        ("y",),
    )


def test_forget_of_nothing_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    """No record and no entry: ``RecordError``; an invalid id or reason is refused before
    anything is written."""
    tenant = _tenant(tmp_path)
    before = (tenant.root / "ledger.jsonl").read_bytes()
    with pytest.raises(RecordError, match="nothing to forget"):
        tenant.forget("nobody", "r")
    with pytest.raises(RecordError):
        tenant.forget("../x", "r")
    with pytest.raises(LedgerFormatError, match="a reason is a string"):
        tenant.forget("x", 5)  # type: ignore[arg-type]
    with pytest.raises(LedgerFormatError, match="at most 4096"):
        tenant.forget("x", "r" * 4097)
    for blank in ("", " \t\n"):
        with pytest.raises(LedgerFormatError) as info:
            tenant.forget("x", blank)
        assert str(info.value) == "a reason must not be empty: say why the record is forgotten"
    assert (tenant.root / "ledger.jsonl").read_bytes() == before
    assert (tenant.memory_dir / "x.json").exists()
    assert not (tenant.root / "forgotten").exists()


def test_forgetting_an_unsealed_record_retires_its_current_testimony(tmp_path: Path) -> None:
    """A record no entry seals (written by another tool) can be forgotten: the tombstone
    retires its current testimony and verify reads it forgotten."""
    tenant = _tenant(tmp_path)
    (tenant.memory_dir / "u.json").write_text(json.dumps({"id": "u", "summary": "u"}))
    receipt = tenant.forget("u", "r")
    assert receipt.tombstone is not None
    assert receipt.tombstone.retires == canonical.digest(
        {"id": "u", "summary": "u"} | dict.fromkeys(
            ("session_id", "agent_id", "key_facts", "decisions_made", "projects_referenced",
             "timestamp")
        )
    )  # fmt: skip
    assert tenant.verify().forgotten == ("u",)


def test_forgetting_a_missing_record_records_why_it_is_gone(tmp_path: Path) -> None:
    """A sealed record whose file was lost reads ``missing``; forgetting it turns the verdict
    into ``forgotten`` (the tombstone retires the sealed digest)."""
    tenant = _tenant(tmp_path)
    (tenant.memory_dir / "x.json").unlink()
    assert tenant.verify().missing == ("x",)
    receipt = tenant.forget("x", "lost in a migration")
    assert receipt.removed is False
    assert (tenant.verify().ok, tenant.verify().forgotten) == (True, ("x",))


def test_a_refused_forget_changes_nothing(tmp_path: Path) -> None:
    """A forget onto a broken chain is refused (``LedgerBrokenError``) before anything is
    written: the record stays and no tombstone, pending or final, nor ``forgotten/``."""
    tenant = _tenant(tmp_path)
    path = tenant.root / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[0] + lines[1])
    with pytest.raises(LedgerBrokenError):
        tenant.forget("x", "r")
    assert (tenant.memory_dir / "x.json").exists()
    assert not (tenant.root / "forgotten").exists()


def test_forget_order_makes_the_line_durable_before_the_file_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forget order: the tombstone is written and fsynced as ``x.json.pending`` and renamed
    into place (``forgotten/`` fsynced); then the ledger line is written and flushed, and the
    head's slot written and flushed (FORMAT.md 4.3); only then is ``x.json`` unlinked and
    ``memory/`` fsynced; last the tombstone is renamed to ``x.json`` and ``forgotten/``
    fsynced."""
    tenant = _tenant(tmp_path)
    ops = Recorder(monkeypatch)
    tenant.forget("x", "r")
    monkeypatch.undo()
    watched = {"x.json.pending~tmp", "x.json.pending", "x.json", "memory", "forgotten"}
    order = [
        c
        for c in ops.calls
        if (c[0] in ("fsync", "replace", "unlink") and set(c[1].split("->")) & watched)
        or (c[0] in ("pwrite", "fdatasync") and c[1] in ("ledger.jsonl", "ledger.head"))
    ]
    assert order == [
        ("fsync", "x.json.pending~tmp"),
        ("replace", "x.json.pending~tmp->x.json.pending"),
        ("fsync", "forgotten"),
        ("pwrite", "ledger.jsonl"),
        ("fdatasync", "ledger.jsonl"),
        ("pwrite", "ledger.head"),
        ("fdatasync", "ledger.head"),
        ("unlink", "x.json"),
        ("fsync", "memory"),
        ("replace", "x.json.pending->x.json"),
        ("fsync", "forgotten"),
    ]


def _count_forget_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    tenant = _tenant(tmp_path / "count")
    ops = Recorder(monkeypatch)
    tenant.forget("x", "r")
    monkeypatch.undo()
    return len(ops.calls)


def test_a_crash_at_any_step_of_forget_leaves_the_record_sealed_or_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash property (issue 20): for every step k of a forget, stop it just before its k-th
    file operation. Verify then reads ``x`` sealed (the line was not written) or forgotten
    (it was), ``ok`` and never missing, altered or reappeared; ``seal`` then finishes or
    undoes the forget, leaving exactly the record or exactly the tombstone."""
    steps = _count_forget_steps(tmp_path, monkeypatch)
    assert steps >= 15
    outcomes = set()
    for k in range(steps + 1):
        tenant = _tenant(tmp_path / f"k{k}")
        ops = Recorder(monkeypatch, crash_at=k)
        with contextlib.suppress(Crash):
            tenant.forget("x", "r")
        monkeypatch.undo()
        line_written = ("pwrite", "ledger.jsonl") in ops.calls
        report = tenant.verify()
        assert (report.ok, report.missing, report.altered, report.reappeared) == (
            True,
            (),
            (),
            (),
        ), k
        verdict = "forgotten" if report.forgotten == ("x",) else "sealed"
        assert report.sealed == (1 if verdict == "forgotten" else 2), k
        assert verdict == ("forgotten" if line_written else "sealed"), k
        settled = tenant.seal()
        assert (settled.ok, settled.sealed_ids) == (True, ()), k
        memory = sorted(p.name for p in tenant.memory_dir.iterdir())
        forgotten = tenant.root / "forgotten"
        tombs = sorted(p.name for p in forgotten.iterdir()) if forgotten.exists() else []
        if verdict == "forgotten":
            assert (memory, tombs) == (["y.json"], ["x.json"]), k
        else:
            assert (memory, tombs) == (["x.json", "y.json"], []), k
        assert tenant.verify().ok, k
        outcomes.add(verdict)
    assert outcomes == {"sealed", "forgotten"}


def test_forgetting_again_after_a_crash_finishes_the_first_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forget stopped after its line (before the unlink) is finished by the next forget of
    the id, which appends nothing and returns the first tombstone."""
    steps = _count_forget_steps(tmp_path, monkeypatch)
    for k in range(steps):
        trial = _tenant(tmp_path / f"c{k}")
        rec = Recorder(monkeypatch, crash_at=k)
        with contextlib.suppress(Crash):
            trial.forget("x", "first")
        monkeypatch.undo()
        if ("pwrite", "ledger.jsonl") not in rec.calls or ("unlink", "x.json") in rec.calls:
            continue
        receipt = trial.forget("x", "second")
        assert (receipt.already_forgotten, receipt.removed) == (True, True), k
        assert receipt.tombstone is not None and receipt.tombstone.reason == "first", k
        assert len(_lines(trial)) == 3, k
        assert not (trial.memory_dir / "x.json").exists(), k
        return
    pytest.fail("no crash step fell between the line and the unlink")


def test_mnemo_cortex_sees_a_forgotten_record_as_missing(tmp_path: Path) -> None:
    """How the anchor's own verifier sees ``op: "forget"`` (it never reads ``op``): the chain
    still verifies (entry hashes cover the op like any value), and the forgotten id reads
    ``missing``, so mnemo-cortex's ``ok`` is false (docs/FORMAT.md, section 4.5)."""
    tenant = _tenant(tmp_path)
    tenant.forget("x", "r")
    assert mnemo_verify(tenant.root) == {
        "ok": False,
        "chain": "intact",
        "entries": 3,
        "sealed": 1,
        "altered": [],
        "missing": ["x"],
        "unsealed": [],
    }


def test_verify_ledger_alone_judges_forget_entries(tmp_path: Path) -> None:
    """``verify_ledger`` with a plain testimony mapping: an absent id whose latest entry is a
    forget is forgotten; present with the tombstone's digest (a forget under way) it is
    forgotten too; present with anything else it has reappeared."""
    tenant = _tenant(tmp_path)
    receipt = tenant.forget("x", "r")
    y = _lines(tenant)[1]["content_sha256"]
    path = tenant.root / "ledger.jsonl"
    assert verify_ledger(path, {"y": y}).forgotten == ("x",)
    under_way = verify_ledger(path, {"y": y, "x": ("a" * 64, receipt.entry.content_sha256)})
    assert (under_way.forgotten, under_way.reappeared) == (("x",), ())
    back = verify_ledger(path, {"y": y, "x": "a" * 64})
    assert (back.forgotten, back.reappeared, back.ok) == ((), ("x",), False)


def test_a_copied_tenant_keeps_its_tombstones(tmp_path: Path) -> None:
    """A tenant copied elsewhere (its folder moved whole) verifies the same: tombstones live
    beside the ledger, ``forgotten/<id>.json``."""
    tenant = _tenant(tmp_path)
    tenant.forget("x", "r")
    shutil.copytree(tenant.root, tmp_path / "copy")
    assert Tenant(tmp_path / "copy").verify().to_dict() == tenant.verify().to_dict()


_STEPS = st.lists(
    st.tuples(st.sampled_from(["save", "forget", "restore", "remove"]), st.sampled_from("abc")),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(_STEPS)
def test_verdicts_match_a_naive_model_of_saves_forgets_and_restores(
    steps: list[tuple[str, str]],
) -> None:
    """Property: after any sequence of saves, forgets, restores of the last saved file and
    removals, verify's verdicts equal a naive model (latest entry save: file matches ->
    sealed, absent -> missing; latest entry forget: absent -> forgotten, present ->
    reappeared; no entry -> unsealed), and the chain stays intact."""
    with tempfile.TemporaryDirectory() as tmp:
        tenant = Tenant(Path(tmp) / "t")
        tenant.initialize()
        latest: dict[str, str] = {}  # id -> "save" | "forget"
        saved: dict[str, bytes] = {}  # id -> last saved file bytes
        for n, (op, rid) in enumerate(steps):
            path = tenant.memory_dir / f"{rid}.json"
            if op == "save":
                tenant.save({"id": rid, "summary": f"{rid}-{n}"})
                saved[rid], latest[rid] = path.read_bytes(), "save"
            elif op == "forget" and (rid in latest or path.exists()):
                tenant.forget(rid, "r")
                latest[rid] = "forget"
            elif op == "restore" and rid in saved:
                path.write_bytes(saved[rid])
            elif op == "remove" and path.exists():
                path.unlink()
        expected: dict[str, list[str]] = {
            k: [] for k in ("forgotten", "reappeared", "missing", "unsealed")
        }
        sealed = 0
        for rid in "abc":
            present = (tenant.memory_dir / f"{rid}.json").exists()
            if rid not in latest:
                if present:
                    expected["unsealed"].append(rid)
            elif latest[rid] == "forget":
                expected["reappeared" if present else "forgotten"].append(rid)
            elif present:
                sealed += 1  # a restore writes back the latest saved bytes
            else:
                expected["missing"].append(rid)
        report = tenant.verify()
        assert report.chain in ("intact", "empty")
        assert (report.sealed, report.altered) == (sealed, ())
        for key, ids in expected.items():
            assert list(getattr(report, key)) == ids, key


def test_a_tombstone_with_an_empty_reason_still_reads() -> None:
    """Only a new forget needs a reason: a tombstone file written with an empty one before
    that rule still parses, to the same bytes."""
    data = (
        b'{"forgotten_at":"2026-05-29T12:00:00.000000Z","memory_id":"x","reason":"",'
        b'"retires":"' + b"a" * 64 + b'","schema":"merkle-memory/tombstone/1"}\n'
    )
    tomb = Tombstone.from_bytes(data)
    assert (tomb.memory_id, tomb.reason, tomb.to_bytes()) == ("x", "", data)


def _tree(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files}


def _edit_line_2(tenant: Tenant) -> None:
    path = tenant.root / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"op":"save"', b'"op":"forget"')
    path.write_bytes(b"".join(lines))


def test_forget_on_a_broken_chain_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """A copy of a tenant with ledger line 2 edited (its op made ``forget``): forgetting
    either record raises ``LedgerBrokenError`` naming the break, with the verify report, and
    no file of the tenant changes (no tombstone, no record removed)."""
    tenant = _tenant(tmp_path)
    _edit_line_2(tenant)
    before = _tree(tenant.root)
    for mid in ("x", "y"):
        with pytest.raises(LedgerBrokenError) as info:
            tenant.forget(mid, "r")
        assert str(info.value) == (
            "t: ledger chain broken at seq 2: entry hash does not match its contents; "
            "refusing to forget"
        )
        assert info.value.report.broken_at == 2
        assert _tree(tenant.root) == before


def test_forget_of_an_altered_record_needs_force(tmp_path: Path) -> None:
    """A record whose file no longer matches its entry is refused (``RecordError``, nothing
    changed); with ``force=True`` it is forgotten, the receipt says ``was_altered`` and the
    tombstone retires the digest the ledger sealed (not the altered file's)."""
    tenant = _tenant(tmp_path)
    sealed = _lines(tenant)[0]["content_sha256"]
    (tenant.memory_dir / "x.json").write_text('{"id":"x","summary":"edited"}', encoding="utf-8")
    before = _tree(tenant.root)
    with pytest.raises(RecordError) as info:
        tenant.forget("x", "r")
    assert str(info.value) == (
        "t: 'x' is altered (its file no longer matches its entry at seq 1); forgetting it "
        "would erase the evidence of the change: look at the file first, then forget it with "
        "force (--force)"
    )
    assert _tree(tenant.root) == before
    receipt = tenant.forget("x", "r", force=True)
    assert (receipt.was_altered, receipt.removed, receipt.entry.seq) == (True, True, 3)
    assert receipt.tombstone is not None and receipt.tombstone.retires == sealed
    assert receipt.to_dict()["was_altered"] is True
    clean = tenant.forget("y", "r")
    assert (clean.was_altered, clean.to_dict()["was_altered"]) == (False, False)
