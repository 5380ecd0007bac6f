"""Tenants on both backends: the ledger scenarios, the verdicts and the proofs give the same
reports on a folder and on PostgreSQL, and a tenant moves between them byte for byte.

Every scenario runs once per backend and asserts exact values, so both backends give these
very reports. Tampering goes through each backend's own storage (a file rewritten, a row
updated), as an intruder would. The PostgreSQL cases need the test server (tests/servers.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import admin

from merkle_memory.errors import (
    DatabaseError,
    LedgerBrokenError,
    LedgerRollbackError,
    TenantError,
)
from merkle_memory.ledger import (
    Ledger,
    PostgresTenant,
    Tenant,
    export_tenant,
    import_tenant,
    open_tenant,
    verify_ledger,
)
from merkle_memory.ledger._postgres import _TENANT, split_lines
from merkle_memory.ledger.proofs import check, prove_consistency, prove_inclusion, tree_head
from merkle_memory.ledger.tenant import TENANT_NAME
from merkle_memory.proof import verify_consistency, verify_inclusion

TS = 1_789_851_200.25


class Backend:
    """One tenant on one backend, with an intruder's access to its storage."""

    def __init__(self, kind: str, where: Path | str) -> None:
        self.kind = kind
        self.where = where
        self.tenant: Tenant | PostgresTenant = open_tenant(
            where if kind == "folder" else f"{where}#cc"
        )

    def _sql(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        with admin(str(self.where)) as conn:
            cursor = conn.execute(statement, args)
            return cursor.fetchall() if cursor.description else []

    def put_raw(self, name: str, data: bytes) -> None:
        """Write the bytes of record file ``memory/<name>`` behind the library's back."""
        if isinstance(self.tenant, Tenant):
            self.tenant.memory_dir.mkdir(parents=True, exist_ok=True)
            (self.tenant.memory_dir / name).write_bytes(data)
            return
        tenant = self.tenant.store.tenant_id(create=True)
        self._sql(
            "INSERT INTO mm_records VALUES (%s, %s, %s)"
            " ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body",
            tenant, name, data,
        )  # fmt: skip

    def edit(self, name: str, **changes: object) -> None:
        """Rewrite one record with ``changes`` (as a text editor would: plain JSON)."""
        record = json.loads(self.raw(name))
        record.update(changes)
        self.put_raw(name, json.dumps(record).encode())

    def raw(self, name: str) -> bytes:
        if isinstance(self.tenant, Tenant):
            return (self.tenant.memory_dir / name).read_bytes()
        rows = self._sql("SELECT body FROM mm_records WHERE name = %s", name)
        return bytes(rows[0][0])

    def drop(self, name: str) -> None:
        """Delete a record."""
        if isinstance(self.tenant, Tenant):
            (self.tenant.memory_dir / name).unlink()
        else:
            self._sql("DELETE FROM mm_records WHERE name = %s", name)

    def ledger_bytes(self) -> bytes:
        with self.tenant.ledger.store.reader() as file:
            return b"" if file is None else file.read(0, file.size())

    def set_ledger(self, data: bytes) -> None:
        """Replace the ledger's bytes (the head is left as it is)."""
        if isinstance(self.tenant, Tenant):
            self.tenant.ledger.path.write_bytes(data)
            return
        tenant = self.tenant.store.tenant_id()
        self._sql("DELETE FROM mm_ledger_lines WHERE tenant_id = %s", tenant)
        start = 0
        for line in split_lines(data):
            self._sql("INSERT INTO mm_ledger_lines VALUES (%s, %s, %s)", tenant, start, line)
            start += len(line)
        self._sql("UPDATE mm_tenants SET size = %s WHERE id = %s", start, tenant)


@pytest.fixture(params=["folder", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh tenant ``cc`` on each backend."""
    if request.param == "postgres":
        yield Backend("postgres", request.getfixturevalue("postgres_url"))
    else:
        yield Backend("folder", tmp_path / "agents" / "cc")


def report(**changes: Any) -> dict[str, Any]:
    """An ok verify report with ``changes``."""
    base: dict[str, Any] = {
        "ok": True, "chain": "intact", "entries": 0, "broken_at": None, "reason": None,
        "sealed": 0, "altered": [], "missing": [], "unsealed": [], "disputed": [],
    }  # fmt: skip
    return base | changes


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_tenant_name_rule_is_the_one_of_folders() -> None:
    """The URL fragment obeys exactly the rule of tenant folder names."""
    assert _TENANT.pattern == TENANT_NAME.pattern


def test_save_then_verify_is_intact(backend: Backend) -> None:
    """Two saves: two sealed records, entries 1 and 2, the record as a folder would hold it."""
    t = backend.tenant
    assert t.save({"id": "m1", "session_id": "s", "summary": "we decided"}).seq == 1
    assert t.save({"id": "m2", "summary": "later"}).seq == 2
    assert t.verify().to_dict() == report(entries=2, sealed=2)
    assert json.loads(backend.raw("m1.json")) == {"id": "m1", "session_id": "s",
                                                  "summary": "we decided"}  # fmt: skip
    assert t.name == "cc"


def test_scenarios_altered_filing_missing(backend: Backend) -> None:
    """Scenarios 15, 16 and 18: an edited summary is altered, a filing field is free, a
    deleted record is missing."""
    t = backend.tenant
    for rid in ("m1", "m2", "m3"):
        t.save({"id": rid, "summary": f"said {rid}"})
    backend.edit("m1.json", summary="what somebody wishes")
    backend.edit("m2.json", category="doctrine")
    backend.drop("m3.json")
    assert t.verify().to_dict() == report(
        ok=False, entries=3, sealed=1, altered=["m1"], missing=["m3"]
    )


def test_seal_adopts_sorted_and_skips_what_cannot_be_sealed(backend: Backend) -> None:
    """Scenario 19: unsealed is not a failure; seal adopts in sorted order, skipping a record
    outside RFC 8785 and an unparseable one, with their reasons."""
    t = backend.tenant
    t.save({"id": "born", "summary": "here"})
    for rid in ("zz", "aa"):
        backend.put_raw(f"{rid}.json", json.dumps({"id": rid, "summary": rid}).encode())
    backend.put_raw("big.json", json.dumps({"id": "big", "summary": 2**60}).encode())
    backend.put_raw("bad.json", b"{")
    assert t.verify().to_dict() == report(entries=1, sealed=1,
                                          unsealed=["aa", "bad", "big", "zz"])  # fmt: skip
    done = t.seal()
    assert (done.sealed_ids, done.skipped) == (("aa", "zz"), ("bad", "big"))
    assert dict(done.skip_reasons)["big"] == "a sealed value outside RFC 8785"
    assert done.to_dict() == report(entries=3, sealed=3, unsealed=["bad", "big"]) | {
        "sealed_now": 2, "sealed_ids": ["aa", "zz"],
    }  # fmt: skip
    assert [e.op for e in t.ledger.entries()] == ["save", "adopt", "adopt"]


def test_a_rewritten_line_breaks_the_chain_and_seal_refuses(backend: Backend) -> None:
    """An entry rewritten in storage: verify names the break and demotes what follows (the
    record it sealed is disputed, the one after it too), and seal refuses to adopt."""
    t = backend.tenant
    for rid in ("a", "b", "c"):
        t.save({"id": rid, "summary": rid})
    lines = backend.ledger_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"memory_id":"b"', b'"memory_id":"B"')
    backend.set_ledger(b"\n".join(lines))
    expected = report(
        ok=False, chain="broken", entries=3, broken_at=2,
        reason="entry hash does not match its contents", sealed=1,
        missing=["B"], unsealed=["b"], disputed=["c"],
    )  # fmt: skip
    assert t.verify().to_dict() == expected
    backend.put_raw("d.json", json.dumps({"id": "d"}).encode())
    with pytest.raises(LedgerBrokenError) as caught:
        t.seal()
    assert caught.value.report.to_dict() == expected | {"unsealed": ["b", "d"]}


def test_a_truncated_ledger_is_a_rollback(backend: Backend) -> None:
    """The last entry cut away: the head still names it, so verify reports the chain broken
    at the first seq the ledger lacks, and a save is refused as a rollback."""
    t = backend.tenant
    for rid in ("a", "b", "c"):
        t.save({"id": rid, "summary": rid})
    whole = backend.ledger_bytes()
    backend.set_ledger(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1])
    got = t.verify().to_dict()
    assert (got["chain"], got["broken_at"], got["entries"], got["missing"]) == (
        "broken", 3, 2, [],
    )  # fmt: skip
    assert (
        got["reason"]
        == "ledger.head records a later entry (seq 3) than the ledger holds (last seq 2)"
    )
    with pytest.raises(LedgerRollbackError):
        t.save({"id": "e", "summary": "late"})


def test_a_rolled_back_tenant_is_never_proven_or_signed(backend: Backend) -> None:
    """The last entry cut away (the head still names it): tree_head, prove_inclusion and
    prove_consistency refuse with verify's reason, on both backends, before any proof."""
    t = backend.tenant
    for rid in ("a", "b", "c"):
        t.save({"id": rid, "summary": rid})
    whole = backend.ledger_bytes()
    backend.set_ledger(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1])
    reason = "ledger.head records a later entry (seq 3) than the ledger holds (last seq 2)"
    assert t.verify().reason == reason
    for attempt in (
        lambda: tree_head(t.ledger, "o"),
        lambda: prove_inclusion(t.ledger, "a"),
        lambda: prove_consistency(t.ledger, 1),
    ):
        with pytest.raises(LedgerRollbackError) as caught:
            attempt()
        assert str(caught.value) == (
            f"{t.ledger.store.label}: ledger chain broken at seq 3: {reason}; nothing is "
            "proven or signed"
        )
        assert (caught.value.expected_seq, caught.value.found_seq) == (3, 2)


def test_claimants_of_one_id_are_reported(backend: Backend) -> None:
    """A second file claiming a sealed id with other testimony is ignored and listed."""
    t = backend.tenant
    t.save({"id": "m1", "summary": "true"})
    backend.put_raw("copy.json", json.dumps({"id": "m1", "summary": "forged"}).encode())
    got = t.verify()
    assert got.to_dict() == report(entries=1, sealed=1) | {
        "ignored_claimants": [{"file": "memory/copy.json", "id": "m1"}]
    }
    assert got.ignored_claimants == (("m1", "memory/copy.json"),)


def test_proofs_and_checkpoint_check_out(backend: Backend) -> None:
    """Inclusion and consistency proofs verify against tree heads; a line rewritten after
    the sidecar was synced is found by check."""
    led = backend.tenant.ledger
    for i in range(9):
        led.append(f"m{i % 4}", _digest(str(i)), ts=TS + i)
    proof = prove_inclusion(led, "m1")
    head = tree_head(led, "o.example/cc")
    assert (proof.leaf_index, proof.tree_size, head.size) == (5, 9, 9)
    verify_inclusion(
        proof.leaf_hash, proof.leaf_index, proof.tree_size, proof.inclusion_proof, head.root
    )
    old = tree_head(led, "o.example/cc")
    led.append("m9", _digest("9"), ts=TS + 9)
    grown = prove_consistency(led, 9)
    new_root = tree_head(led, "o.example/cc").root
    verify_consistency(9, 10, grown.consistency_proof, old.root, new_root)
    assert check(led)
    lines = backend.ledger_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"op":"save"', b'"op":"adopt"')
    backend.set_ledger(b"\n".join(lines))
    assert verify_ledger(led.store, {}).broken_at == 3


def test_proofs_are_the_same_on_both_backends(postgres_url: str, tmp_path: Path) -> None:
    """The same appends give the same bytes, proofs and signed-note body on both backends."""
    folder = Ledger(tmp_path / "ledger.jsonl")
    database = Ledger(postgres_url + "#cc")
    for led in (folder, database):
        for i in range(13):
            led.append(f"m{i % 5}", _digest(str(i)), ts=TS + i)
    assert Backend("postgres", postgres_url).ledger_bytes() == folder.path.read_bytes()
    for memory_id in ("m0", "m4"):
        assert prove_inclusion(database, memory_id) == prove_inclusion(folder, memory_id)
    assert prove_consistency(database, 6) == prove_consistency(folder, 6)
    assert tree_head(database, "o/x").to_text() == tree_head(folder, "o/x").to_text()


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under a tenant folder that export/import carries, by relative path."""
    kept = ("ledger.jsonl", "ledger.torn")
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and (p.parent.name == "memory" or p.name in kept)
    }


def test_export_import_round_trip_is_byte_identical(postgres_url: str, tmp_path: Path) -> None:
    """A folder tenant with sealed, altered, unsealed, unparseable and claimant records and a
    quarantined fragment goes into the database and back out unchanged, byte for byte, and
    verify reports the same at every step."""
    source = Tenant(tmp_path / "src")
    for rid in ("a", "b", "c"):
        source.save({"id": rid, "summary": rid, "n": 1.5})
    folder = Backend("folder", source.root)
    folder.edit("b.json", summary="changed")
    folder.put_raw("u.json", b'{"id": "u", "summary": "\\u00e9t\\u00e9"}\n')
    folder.put_raw("junk.json", b"\xff not json")
    folder.put_raw("claim.json", json.dumps({"id": "a", "summary": "x"}).encode())
    with source.ledger.store.locked(write=True) as file:
        file.append(file.size(), b'{"seq":4,"ts":')
    source.ledger.recover()  # quarantined into ledger.torn
    before = source.verify()
    url = postgres_url + "#moved"
    moved = import_tenant(source.root, url)
    assert moved.verify() == before
    assert open_tenant(url).verify().to_dict() == report(
        ok=False, entries=3, sealed=2, altered=["b"], unsealed=["junk", "u"]
    ) | {"ignored_claimants": [{"file": "memory/claim.json", "id": "a"}]}
    out = export_tenant(url, tmp_path / "out")
    assert _tree(out) == _tree(source.root)
    assert Tenant(out).verify() == before
    assert Tenant(out).save({"id": "z"}).seq == 4  # the exported head carries on the chain
    with pytest.raises(TenantError, match="already holds"):
        import_tenant(source.root, url)
    with pytest.raises(TenantError, match="absent or empty"):
        export_tenant(url, out)


def test_import_refuses_what_a_row_cannot_hold(postgres_url: str, tmp_path: Path) -> None:
    """A record that is a symbolic link, or a re-save or a forget left pending, stops the
    import before anything is written to the database."""
    source = Tenant(tmp_path / "src")
    source.save({"id": "a"})
    (source.memory_dir / "l.json").symlink_to(source.memory_dir / "a.json")
    with pytest.raises(TenantError, match="not a regular file"):
        import_tenant(source.root, postgres_url + "#x")
    (source.memory_dir / "l.json").unlink()
    (source.memory_dir / "a.json.pending").write_text("{}")
    with pytest.raises(TenantError, match="a re-save was interrupted"):
        import_tenant(source.root, postgres_url + "#x")
    (source.memory_dir / "a.json.pending").unlink()
    (source.root / "forgotten").mkdir()
    (source.root / "forgotten" / "a.json.pending").write_text("{}")
    with pytest.raises(TenantError, match="a forget was interrupted; run `ledger seal`"):
        import_tenant(source.root, postgres_url + "#x")
    (source.root / "forgotten" / "a.json.pending").unlink()
    (source.root / "forgotten" / "t.json").symlink_to(source.memory_dir / "a.json")
    with pytest.raises(TenantError) as caught:
        import_tenant(source.root, postgres_url + "#x")
    assert caught.value.reason == (
        "forgotten/t.json is not a regular file (a database holds bytes only)"
    )
    assert not PostgresTenant(postgres_url + "#x").store.exists() or (
        PostgresTenant(postgres_url + "#x").verify().entries == 0
    )


def test_many_tenants_in_one_database_have_separate_chains(postgres_url: str) -> None:
    """Scenario 20 in one database: two tenants, two chains, each starting at seq 1."""
    cc, rocky = open_tenant(postgres_url + "#cc"), open_tenant(postgres_url + "#rocky")
    cc.save({"id": "a", "summary": "cc's"})
    rocky.save({"id": "b", "summary": "rocky's"})
    rocky.save({"id": "c", "summary": "rocky's"})
    assert (cc.verify().entries, rocky.verify().entries) == (1, 2)
    with pytest.raises(TenantError, match="no tenant 'nobody'"):
        open_tenant(postgres_url + "#nobody").verify()


@pytest.mark.parametrize("mode", ["salted", "mnemo"])
def test_testimony_modes_and_forget_give_the_same_reports(backend: Backend, mode: str) -> None:
    """A salted and a mnemo tenant on each backend: the mode is recorded, saves seal it (a
    salt written into the record; mnemo's own digest of a value beyond RFC 8785), a forget
    retires the latest entry, a record put back reads reappeared, a second forget removes
    it; the reports are the same on both backends."""
    where = backend.where if backend.kind == "folder" else f"{backend.where}#cc"
    tenant = open_tenant(where, testimony=mode)
    assert tenant.initialize() == mode
    record: dict[str, Any] = {"id": "a", "summary": "my card ends in 4242"}
    if mode == "mnemo":
        record["n"] = 2**60 + 1  # beyond RFC 8785: only mnemo's digest seals it
    first = tenant.save(record)
    tenant.save({"id": "b", "summary": "kept"})
    assert (b'"testimony_salt":' in backend.raw("a.json")) == (mode == "salted")
    assert open_tenant(where).testimony_mode == mode
    backup = backend.raw("a.json")
    receipt = tenant.forget("a", "user asked")
    assert (receipt.removed, receipt.already_forgotten, receipt.entry.seq) == (True, False, 3)
    assert receipt.tombstone is not None and receipt.tombstone.retires == first.content_sha256
    assert tenant.tombstone("a") == receipt.tombstone
    assert tenant.verify().to_dict() == report(entries=3, sealed=1, forgotten=["a"])
    backend.put_raw("a.json", backup)
    assert tenant.verify().to_dict() == report(ok=False, entries=3, sealed=1, reappeared=["a"])
    again = tenant.forget("a", "again")
    assert (again.removed, again.already_forgotten, again.tombstone) == (
        True, True, receipt.tombstone,
    )  # fmt: skip
    assert tenant.verify().to_dict() == report(entries=3, sealed=1, forgotten=["a"])
    other, why = ("rfc8785", "cannot change to") if mode == "salted" else ("salted", "plain")
    with pytest.raises(TenantError, match=why):
        open_tenant(where, testimony=other).save({"id": "c"})


def test_a_database_tenant_installs_its_tables_only_when_needed(postgres_url: str) -> None:
    """A database whose tenants never recorded a mode nor forgot anything has no
    ``tenant`` component (databases made before it open unchanged and read as rfc8785
    tenants with no tombstone); the first forget adds it (version 1); another version is
    refused."""
    tenant = open_tenant(postgres_url + "#cc")
    tenant.save({"id": "a", "summary": "x"})
    assert (tenant.testimony_mode, tenant.tombstone("a")) == ("rfc8785", None)
    sql = "SELECT to_regclass('mm_tombstones') IS NULL, to_regclass('mm_tenant_settings') IS NULL"
    with admin(postgres_url) as conn:
        assert conn.execute(sql).fetchall() == [(True, True)]
    tenant.forget("a", "asked")
    with admin(postgres_url) as conn:
        assert conn.execute(sql).fetchall() == [(False, False)]
        found = "SELECT version FROM mm_schema WHERE component = 'tenant'"
        assert conn.execute(found).fetchall() == [(1,)]
        conn.execute("UPDATE mm_schema SET version = 9 WHERE component = 'tenant'")
    with pytest.raises(DatabaseError, match="tenant schema version 9"):
        open_tenant(postgres_url + "#cc").verify()


def test_a_database_forget_killed_mid_transaction_changes_nothing(postgres_url: str) -> None:
    """The server ends the forget's session after its tombstone row and the record's
    deletion are sent, before the entry commits (a client killed mid-way): the forget
    raises and nothing of it is kept; forgetting again then succeeds."""
    url = postgres_url + "#cc"
    tenant = open_tenant(url)
    assert isinstance(tenant, PostgresTenant)
    tenant.save({"id": "a", "summary": "x"})
    tenant.forget("a", "warm up: installs the tables")
    tenant.save({"id": "b", "summary": "y"})
    before = tenant.verify().to_dict()
    append = tenant.ledger.append

    def killed(*args: Any, **kwargs: Any) -> Any:
        pid = tenant.store.with_connection(
            "pid", lambda conn, t: conn.info.backend_pid, default=None
        )
        with admin(postgres_url) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return append(*args, **kwargs)

    tenant.ledger.append = killed  # type: ignore[method-assign]
    with pytest.raises(DatabaseError):
        tenant.forget("b", "asked")
    fresh = open_tenant(url)
    assert fresh.verify().to_dict() == before == report(entries=3, sealed=1, forgotten=["a"])
    assert fresh.tombstone("b") is None
    assert fresh.forget("b", "asked").entry.seq == 4
    assert fresh.verify().to_dict() == report(entries=4, sealed=0, forgotten=["a", "b"])
