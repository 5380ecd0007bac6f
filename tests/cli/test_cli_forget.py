"""``ledger forget``, ``ledger init``, ``bank forget``, ``bank add --salted`` and ``dag forget``
through ``main(argv)``: output, JSON keys and exit codes (issue 20, issue 16 item 8)."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import ArchiveTarget
from support import T0, cc_line, run_main

from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import memory_uri
from merkle_memory.dag.store import open_store
from merkle_memory.ledger import PostgresTenant, Tenant, open_tenant
from merkle_memory.transcripts import import_file


def _tenant(tmp_path: Path) -> Path:
    tenant = Tenant(tmp_path / "cc")
    tenant.save({"id": "note-1", "summary": "my card ends in 4242"})
    tenant.save({"id": "note-2", "summary": "we chose sqlite"})
    return tenant.root


@dataclass(frozen=True, slots=True)
class TenantAt:
    """A tenant of the tests below, in a folder or in PostgreSQL."""

    arg: str  # what the CLI takes: the folder, or postgresql://...#cc
    tenant: Tenant | PostgresTenant

    def put_back(self, name: str, data: bytes) -> None:
        """Restore ``memory/<name>`` behind the library's back (a backup put back)."""
        if isinstance(self.tenant, Tenant):
            (self.tenant.memory_dir / name).write_bytes(data)
            return
        self.tenant.store.with_connection(
            "put back",
            lambda conn, t: conn.execute(
                "INSERT INTO mm_records VALUES (%s, %s, %s)", (t, name, data)
            ),
            default=None,
        )

    def record(self, name: str) -> bytes | None:
        """The bytes of ``memory/<name>``, or ``None``."""
        found = dict(self.tenant._rows()) if isinstance(self.tenant, PostgresTenant) else None
        if found is not None:
            return found.get(name)
        path = self.tenant.memory_dir / name
        return path.read_bytes() if path.exists() else None


@pytest.fixture(params=["folder", "postgres"])
def tenant_at(request: pytest.FixtureRequest, tmp_path: Path) -> TenantAt:
    """Tenant ``cc`` holding note-1 and note-2, in a folder and in PostgreSQL."""
    if request.param == "folder":
        root = _tenant(tmp_path)
        return TenantAt(str(root), Tenant(root))
    url = request.getfixturevalue("postgres_url") + "#cc"
    tenant = open_tenant(url)
    tenant.save({"id": "note-1", "summary": "my card ends in 4242"})
    tenant.save({"id": "note-2", "summary": "we chose sqlite"})
    return TenantAt(url, tenant)


def test_ledger_forget_then_verify_says_forgotten_and_exits_0(
    tenant_at: TenantAt, capsys: pytest.CaptureFixture[str]
) -> None:
    """Acceptance, on a folder and on PostgreSQL: forget, then verify exits 0 with the id
    forgotten (text and JSON); the record is gone and its tombstone kept."""
    where = tenant_at.arg
    code, out, err = run_main(capsys, "ledger", "forget", where, "note-1", "--reason", "asked")
    tomb = tenant_at.tenant.tombstone("note-1")
    assert tomb is not None and (tomb.memory_id, tomb.reason) == ("note-1", "asked")
    assert (code, out, err) == (0, f"forgotten note-1: seq 3, tombstone {tomb.digest()}\n", "")
    assert tenant_at.record("note-1.json") is None
    code, out, _ = run_main(capsys, "ledger", "verify", where)
    assert code == 0
    assert out.splitlines() == [
        "cc: ok: chain intact (3 entries) · sealed 1 · altered 0 · missing 0 · unsealed 0 · "
        "disputed 0 · forgotten 1",
        "  forgotten: note-1",
    ]
    code, out, _ = run_main(capsys, "ledger", "verify", where, "--json")
    assert (code, json.loads(out)["cc"]["forgotten"]) == (0, ["note-1"])


def test_ledger_forget_restored_file_is_reported_and_json_receipt(
    tenant_at: TenantAt, capsys: pytest.CaptureFixture[str]
) -> None:
    """Acceptance, on a folder and on PostgreSQL: a restored record makes verify exit 1
    naming it ``reappeared``; forgetting again prints the earlier receipt with
    ``already_forgotten`` and removes the record."""
    where = tenant_at.arg
    backup = tenant_at.record("note-1.json")
    assert backup is not None
    run_main(capsys, "ledger", "forget", where, "note-1", "--reason", "asked")
    tenant_at.put_back("note-1.json", backup)
    code, out, err = run_main(capsys, "ledger", "verify", where)
    assert code == 1
    assert "reappeared 1" in out and "  reappeared: note-1" in out.splitlines()
    assert err == "error: cc: not ok: 1 reappeared\n"
    code, out, _ = run_main(
        capsys, "ledger", "forget", where, "note-1", "--reason", "again", "--json"
    )
    doc = json.loads(out)
    assert code == 0
    assert sorted(doc) == [
        "already_forgotten",
        "content_sha256",
        "entry",
        "memory_id",
        "removed",
        "seq",
        "tombstone",
        "was_altered",
    ]
    assert (doc["already_forgotten"], doc["removed"], doc["seq"]) == (True, True, 3)
    assert doc["tombstone"]["reason"] == "asked" and doc["entry"]["op"] == "forget"
    assert tenant_at.record("note-1.json") is None
    assert run_main(capsys, "ledger", "verify", where)[0] == 0


def test_ledger_forget_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No such record: exit 1 with one error line; a missing tenant: ``PATH: does not
    exist``, a file: not a tenant folder (exit 1); no --reason: 2."""
    root = _tenant(tmp_path)
    code, out, err = run_main(capsys, "ledger", "forget", str(root), "nobody", "--reason", "r")
    assert (code, out) == (1, "")
    assert err.startswith("error: no record 'nobody'") and err.count("\n") == 1
    code, _, err = run_main(capsys, "ledger", "forget", str(tmp_path / "x"), "a", "--reason", "r")
    assert (code, err) == (1, f"error: {tmp_path / 'x'}: does not exist\n")
    (tmp_path / "f").write_text("")
    code, _, err = run_main(capsys, "ledger", "forget", str(tmp_path / "f"), "a", "--reason", "r")
    assert (code, err) == (1, f"error: {tmp_path / 'f'}: not a tenant folder\n")
    assert run_main(capsys, "ledger", "forget", str(root), "note-1")[0] == 2
    before = (root / "ledger.jsonl").read_bytes()
    for group, target in (("ledger", root), ("bank", tmp_path / "bank")):
        code, out, err = run_main(capsys, group, "forget", str(target), "note-1", "--reason", " ")
        assert (code, out) == (2, "")
        assert err.endswith(
            "error: argument --reason: must not be empty: say why it is forgotten\n"
        )
    assert (root / "ledger.jsonl").read_bytes() == before
    assert (root / "memory" / "note-1.json").exists()


def test_ledger_forget_on_a_broken_chain_exits_1_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial: on a copy whose ledger line 2 was edited (op made ``forget``), ``ledger forget``
    of either record exits 1 with one error line naming the break; no file changes."""
    root = _tenant(tmp_path)
    path = root / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1].replace(b'"op":"save"', b'"op":"forget"'))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for mid in ("note-1", "note-2"):
        code, out, err = run_main(capsys, "ledger", "forget", str(root), mid, "--reason", "x")
        assert (code, out) == (1, "")
        assert err == (
            "error: cc: ledger chain broken at seq 2: entry hash does not match its contents;"
            " refusing to forget\n"
        )
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_ledger_forget_of_an_altered_record_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An altered record: exit 1 naming ``--force``, nothing changed; with ``--force`` it is
    forgotten (exit 0), a warning line says it was altered, the JSON receipt has
    ``was_altered: true``."""
    root = _tenant(tmp_path)
    (root / "memory" / "note-1.json").write_text('{"id":"note-1","summary":"x"}')
    code, out, err = run_main(capsys, "ledger", "forget", str(root), "note-1", "--reason", "r")
    assert (code, out) == (1, "")
    assert err == (
        "error: cc: 'note-1' is altered (its file no longer matches its entry at seq 1); "
        "forgetting it would erase the evidence of the change: look at the file first, then "
        "forget it with force (--force)\n"
    )
    assert (root / "memory" / "note-1.json").exists() and not (root / "forgotten").exists()
    code, out, err = run_main(
        capsys, "ledger", "forget", str(root), "note-1", "--reason", "r", "--force", "--json"
    )
    assert (code, json.loads(out)["was_altered"], json.loads(out)["seq"]) == (0, True, 3)
    assert err == (
        "warning: note-1 was altered (its file did not match its entry); forgotten with "
        "--force: the tombstone retires the sealed digest\n"
    )
    assert not (root / "memory" / "note-1.json").exists()


def test_ledger_init_salted_on_a_tenant_with_entries_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial (HIGH 4c): ``ledger init T --salted`` on a tenant whose ledger holds entries is
    refused (exit 1, one line), and no ``testimony.json`` appears."""
    root = _tenant(tmp_path)
    code, out, err = run_main(capsys, "ledger", "init", str(root), "--salted")
    assert (code, out) == (1, "")
    assert err == (
        f"error: {root}: the ledger already holds entries with plain digests, which salting "
        "cannot unlink from their content; a salted tenant starts empty: make a new tenant "
        "with --salted (testimony='salted') and save the records into it\n"
    )
    assert not (root / "testimony.json").exists()


def test_ledger_init_records_the_testimony_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--salted`` / ``--mnemo`` / ``--testimony`` record the mode and print it; without a
    flag the recorded mode is kept; a salted tenant refuses another mode; two flags: 2."""
    salted, mnemo = tmp_path / "s", tmp_path / "m"
    assert run_main(capsys, "ledger", "init", str(salted), "--salted") == (0, "salted\n", "")
    assert (salted / "testimony.json").read_text() == (
        '{"schema":"merkle-memory/testimony/1","testimony":"salted"}\n'
    )
    assert sorted(p.name for p in salted.iterdir()) == ["ledger.jsonl", "memory", "testimony.json"]
    code, out, _ = run_main(capsys, "ledger", "init", str(mnemo), "--mnemo", "--json")
    assert (code, json.loads(out)) == (0, {"tenant": "m", "testimony": "mnemo"})
    assert run_main(capsys, "ledger", "init", str(mnemo))[:2] == (0, "mnemo\n")
    code, _, err = run_main(capsys, "ledger", "init", str(salted), "--testimony", "rfc8785")
    assert code == 1 and "cannot change to 'rfc8785'" in err
    assert run_main(capsys, "ledger", "init", str(salted), "--mnemo", "--salted")[0] == 2
    assert run_main(capsys, "ledger", "init", str(salted), "--testimony", "md5")[0] == 2
    assert run_main(capsys, "ledger", "init", str(tmp_path / "d"))[:2] == (0, "rfc8785\n")
    assert not (tmp_path / "d" / "testimony.json").exists()


def test_bank_add_salted_and_bank_forget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bank add --salted`` writes a salted memory; ``bank forget`` removes it, the
    consolidation's link is reported as a forgotten link and verify exits 0."""
    bank = tmp_path / "bank"
    args = ["--type", "fact", "--scope", "user", "--timestamp", T0.isoformat()]
    code, out, _ = run_main(capsys, "bank", "add", str(bank), "--salted", *args, "--content", "x")
    mid = out.strip()
    assert code == 0 and MemoryBank(bank).get(mid).salt is not None
    code, out, _ = run_main(capsys, "bank", "consolidate", str(bank), mid, "--content", "sum")
    summary = out.strip()
    code, out, _ = run_main(capsys, "bank", "forget", str(bank), mid, "--reason", "asked", "--json")
    assert (code, json.loads(out)["memory_id"], json.loads(out)["removed"]) == (0, mid, True)
    code, out, _ = run_main(capsys, "bank", "verify", str(bank), "--json")
    doc = json.loads(out)
    rel = MemoryBank(bank).locate(summary).path
    assert (code, doc["ok"], doc["ledger"]["forgotten"]) == (0, True, [mid])
    assert doc["forgotten_links"] == [{"path": rel, "link": memory_uri(mid)}]
    code, out, _ = run_main(capsys, "bank", "verify", str(bank))
    assert code == 0 and f"forgotten link {rel}: {memory_uri(mid)}" in out
    code, _, err = run_main(capsys, "bank", "forget", str(bank), "0" * 64, "--reason", "r")
    assert code == 1 and err.startswith("error: no memory 0000")


def test_bank_list_get_and_verify_name_a_reappeared_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial (MED 8): a forgotten memory restored from a backup: ``bank list`` leaves it out
    and exits 1 naming it; ``bank verify``'s error line counts it as reappeared."""
    bank = tmp_path / "bank"
    args = ["--type", "fact", "--scope", "user", "--timestamp", T0.isoformat()]
    mid = run_main(capsys, "bank", "add", str(bank), *args, "--content", "x")[1].strip()
    rel = MemoryBank(bank).locate(mid).path
    backup = (bank / rel).read_bytes()
    assert run_main(capsys, "bank", "forget", str(bank), mid, "--reason", "asked")[0] == 0
    (bank / rel).write_bytes(backup)
    code, out, err = run_main(capsys, "bank", "list", str(bank))
    assert (code, out) == (1, "")
    assert err == (
        f"error: 1 forgotten memory reappeared and is not listed: {rel}; forget again to "
        f"remove: merkle-memory bank forget {bank} ID\n"
    )
    code, out, _ = run_main(capsys, "bank", "list", str(bank), "--json")
    assert code == 1 and [p["kind"] for p in json.loads(out)["skipped"]] == ["reappeared"]
    code, _out, err = run_main(capsys, "bank", "verify", str(bank))
    assert code == 1
    assert err.splitlines()[-1] == (
        "error: bank failed verification: 0 file(s) do not verify; the ledger is not ok "
        "(1 reappeared)"
    )


def _store(
    target: ArchiveTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, list[str]]:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "my password is hunter2"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "thanks"},
        ],
    }
    src = tmp_path / "body.json"
    src.write_text(json.dumps(body))
    db = target.store
    assert run_main(capsys, "dag", "import", str(src), "--store", db, "--json")[0] == 0
    code, out, _ = run_main(capsys, "dag", "show", "--store", db, "--json", _leaf(db))
    assert code == 0
    return db, [n["hash"] for n in json.loads(out)["nodes"]]


def _leaf(db: str) -> str:
    with open_store(db, create=False) as store:
        return store.leaves()[0].hash


def _stored_text(target: ArchiveTarget) -> bytes:
    """Everything the store keeps that could hold a transcript's text: the files of a SQLite
    store as they are on disk (the database and its WAL), or every bucket and (decompressed)
    archived chunk of a PostgreSQL one."""
    if target.kind == "sqlite":
        files = [Path(target.store + end) for end in ("", "-wal", "-shm", "-journal")]
        return b"".join(p.read_bytes() for p in files if p.is_file())
    buckets = [str(row[0]).encode() for row in target.sql("SELECT bucket FROM {nodes}")]
    chunks = [zlib.decompress(row[0]) for row in target.sql("SELECT data FROM {chunks}")]
    return b"".join(buckets + chunks)


def test_dag_forget_prunes_and_verify_reports_pruned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """``dag forget`` by prefix prints the full hash; ``dag verify`` exits 0 listing the node
    as pruned; ``dag show`` marks it; the JSON says so; forgetting it again exits 0 (SQLite
    and PostgreSQL alike)."""
    db, hashes = _store(archive_store, tmp_path, capsys)
    root = hashes[0]
    assert b"hunter2" in _stored_text(archive_store)  # the control
    code, out, _ = run_main(capsys, "dag", "forget", "--store", db, root[:8], "--reason", "pw")
    assert (code, out) == (0, root + "\n")
    assert b"hunter2" not in _stored_text(archive_store)
    code, out, _ = run_main(capsys, "dag", "verify", "--store", db)
    assert code == 0
    assert out.splitlines() == [f"pruned    {root} (content forgotten)", "ok: 3 nodes, 1 root"]
    code, out, _ = run_main(capsys, "dag", "verify", "--store", db, "--json")
    assert (code, json.loads(out)["pruned"], json.loads(out)["ok"]) == (0, [root], True)
    code, out, _ = run_main(capsys, "dag", "show", "--store", db, hashes[-1])
    assert code == 0 and "(pruned)" in out.splitlines()[0]
    code, out, _ = run_main(capsys, "dag", "show", "--store", db, hashes[-1], "--json")
    assert json.loads(out)["nodes"][0]["pruned"] is True
    assert "pruned" not in json.loads(out)["nodes"][1]
    code, out, err = run_main(capsys, "dag", "forget", "--store", db, root, "--json")
    assert (code, json.loads(out)) == (
        0,
        {"hash": root, "pruned": True, "already_pruned": True, "purged_versions": []},
    )
    code, _, err = run_main(capsys, "dag", "forget", "--store", db, "f" * 64)
    assert code == 1 and err.startswith("error: ")


def test_dag_forget_purges_the_sync_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """The trial's case, on SQLite and PostgreSQL: dag sync, dag forget of the node, the
    source deleted: dag restore exits 1 naming the forget (no forgotten text printed), the
    JSON lists the purged version, and the text is nowhere in the store."""
    folder, store_dir = tmp_path / "syncd", tmp_path / "store"
    folder.mkdir()
    store_dir.mkdir()
    source = folder / "s.jsonl"
    source.write_text(
        cc_line("u1", None, "user", "the password is hunter2") + "\n"
        + cc_line("a1", "u1", "assistant", "ok") + "\n"
    )  # fmt: skip
    db = archive_store.store
    if archive_store.kind == "sqlite":
        db = str(store_dir / "arch.db")
    target = ArchiveTarget(archive_store.kind, db, db)
    assert run_main(capsys, "dag", "sync", str(folder), "--store", db)[0] == 0
    assert b"hunter2" in _stored_text(target)  # the control
    node = import_file(source).nodes[0].hash
    code, out, err = run_main(
        capsys, "dag", "forget", "--store", db, node, "--reason", "secret", "--json"
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "hash": node,
        "pruned": True,
        "already_pruned": False,
        "purged_versions": [{"path": str(source), "version": 1}],
    }
    source.unlink()
    code, out, err = run_main(capsys, "dag", "restore", "--store", db, str(source), "--out", "-")
    assert (code, out) == (1, "")
    assert err.startswith(
        f"error: version 1 of {source} was purged by dag forget of node {node} at "
    )
    assert err.endswith(", reason: secret: its bytes are gone\n")
    assert b"hunter2" not in _stored_text(target)
    code, out, err = run_main(capsys, "dag", "verify", "--store", db)
    assert code == 0 and f"pruned    {node} (content forgotten)" in out
