"""``ledger verify|seal|prove|consistency|checkpoint|export|import`` given
``postgresql://...#tenant`` URLs: the same documents and exit codes as on folders.

Needs the test server (tests/servers.py): skipped without it, failed under CI.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from support import run_main

from merkle_memory.ledger import PostgresLedgerStore, Tenant, open_tenant
from merkle_memory.signed_note import HmacKey


def _report(entries: int, sealed: int, **changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "ok": True, "chain": "intact", "entries": entries, "broken_at": None, "reason": None,
        "sealed": sealed, "altered": [], "missing": [], "unsealed": [], "disputed": [],
    }  # fmt: skip
    return base | changes


def test_verify_and_seal_tenants_by_url_and_all(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify URL and verify --all DATABASE give {tenant: report}; seal adopts; exit codes
    follow the reports."""
    cc, rocky = open_tenant(postgres_url + "#cc"), open_tenant(postgres_url + "#rocky")
    cc.save({"id": "a", "summary": "x"})
    rocky.save({"id": "b", "summary": "y"})
    code, out, _err = run_main(capsys, "ledger", "verify", postgres_url + "#cc", "--json")
    assert (code, json.loads(out)) == (0, {"cc": _report(1, 1)})
    code, out, _err = run_main(capsys, "ledger", "verify", "--all", postgres_url, "--json")
    assert (code, json.loads(out)) == (0, {"cc": _report(1, 1), "rocky": _report(1, 1)})
    rocky.store.with_connection(
        "plant",
        lambda conn, t: conn.execute(
            "INSERT INTO mm_records VALUES (%s, 'z.json', '{\"id\": \"z\"}')", (t,)
        ),
        default=None,
    )
    code, out, _err = run_main(capsys, "ledger", "seal", postgres_url + "#rocky", "--json")
    assert code == 0
    assert json.loads(out) == {"rocky": _report(2, 2) | {"sealed_now": 1, "sealed_ids": ["z"]}}
    code, _out, err = run_main(capsys, "ledger", "verify", postgres_url + "#nobody")
    assert code == 1 and "no tenant 'nobody'" in err


def test_proofs_from_a_database_tenant(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove, consistency and checkpoint read a database tenant; verify-proof accepts the
    proof against the checkpoint's root."""
    url = postgres_url + "#cc"
    tenant = open_tenant(url)
    for i in range(5):
        tenant.save({"id": f"m{i}", "summary": str(i)})
    code, out, _err = run_main(capsys, "ledger", "prove", url, "--memory-id", "m3", "--json")
    proof = json.loads(out)
    assert (code, proof["leaf_index"], proof["tree_size"]) == (0, 3, 5)
    code, out, _err = run_main(capsys, "ledger", "consistency", url, "--old-size", "2", "--json")
    assert (code, json.loads(out)["new_size"]) == (0, 5)
    code, out, _err = run_main(capsys, "ledger", "checkpoint", url, "--origin", "o/cc", "--json")
    assert (code, json.loads(out)["root_hash"]) == (0, proof["root_hash"])
    (tmp_path / "p.json").write_text(json.dumps(proof))
    code, _out, _err = run_main(
        capsys, "ledger", "verify-proof", str(tmp_path / "p.json"), "--root", proof["root_hash"]
    )
    assert code == 0
    code, _out, err = run_main(
        capsys, "ledger", "prove", postgres_url + "#none", "--memory-id", "x"
    )
    label = PostgresLedgerStore(postgres_url + "#none").label
    assert (code, err) == (1, f"error: {label}: no tenant 'none' in the database\n")
    key = tmp_path / "log.key"
    key.write_text(HmacKey("example.com/agents", bytes(range(32))).skey() + "\n")
    out_dir = tmp_path / "public"
    for args in (
        ("tiles", postgres_url + "#none", str(out_dir), "--origin", "o", "--key", str(key)),
        ("checkpoint", postgres_url + "#none", "--origin", "o", "--key", str(key)),
        ("consistency", postgres_url + "#none", "--old-size", "1"),
    ):
        code, out, err = run_main(capsys, "ledger", *args)
        assert (code, out, err) == (1, "", f"error: {label}: no tenant 'none' in the database\n")
    assert not out_dir.exists()  # nothing created for a tenant that is not there


def test_export_and_import_commands(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger import DIR URL then ledger export URL DIR: the reports printed equal the
    source's, the ledger and records come back byte for byte; a non-empty target is refused."""
    source = Tenant(tmp_path / "cc")
    source.save({"id": "a", "summary": "x"})
    source.save({"id": "b", "summary": "y"})
    url = postgres_url + "#cc"
    code, out, _err = run_main(capsys, "ledger", "import", str(source.root), url, "--json")
    assert (code, json.loads(out)) == (0, {"cc": _report(2, 2)})
    code, out, _err = run_main(capsys, "ledger", "export", url, str(tmp_path / "back"), "--json")
    assert (code, json.loads(out)) == (0, {"back": _report(2, 2)})
    for name in ("ledger.jsonl", "memory/a.json", "memory/b.json"):
        assert (tmp_path / "back" / name).read_bytes() == (source.root / name).read_bytes()
    code, _out, err = run_main(capsys, "ledger", "import", str(source.root), url)
    assert code == 1 and "already holds a ledger or records" in err
    code, _out, err = run_main(capsys, "ledger", "export", str(source.root), str(tmp_path / "x"))
    assert code == 2 and "not a postgresql:// URL" in err


def _files(root: Path) -> dict[str, bytes]:
    """Every file of a tenant folder that a copy carries, by relative path: the ledger, the
    quarantine, the records, ``testimony.json`` and the tombstones (not ``ledger.head``,
    whose fingerprint is the folder's own, nor derived sidecars)."""
    kept = {"ledger.jsonl", "ledger.torn", "testimony.json"}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (p.parent != root or p.name in kept)
    }


def test_salted_mnemo_and_forgotten_tenants_move_byte_identically(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A salted and a mnemo tenant (testimony.json), one with a tombstone in forgotten/, and
    one whose ledger alone holds a forget entry (its tombstone file lost) are imported and
    exported back: the verify reports printed are the source's, and every file comes back
    byte for byte; the database tenants keep verifying in their modes."""
    salted = Tenant(tmp_path / "S", testimony="salted")
    salted.save({"id": "s1", "summary": "my card ends in 4242"})
    salted.save({"id": "s2", "summary": "x"})
    salted.forget("s1", "asked")
    mnemo = Tenant(tmp_path / "M", testimony="mnemo")
    mnemo.save({"id": "m1", "summary": "x", "n": 2**60})  # beyond RFC 8785: mnemo only
    forgot = Tenant(tmp_path / "F")
    forgot.save({"id": "f1", "summary": "x"})
    forgot.save({"id": "f2", "summary": "y"})
    forgot.forget("f1", "asked")
    lost = Tenant(tmp_path / "L")
    lost.save({"id": "l1", "summary": "x"})
    lost.forget("l1", "asked")
    (lost.root / "forgotten" / "l1.json").unlink()
    (lost.root / "forgotten").rmdir()
    expected = {
        "S": _report(3, 1, forgotten=["s1"]),
        "M": _report(1, 1),
        "F": _report(3, 1, forgotten=["f1"]),
        "L": _report(2, 0, forgotten=["l1"]),
    }
    for tenant in (salted, mnemo, forgot, lost):
        name = tenant.name
        code, out, _err = run_main(capsys, "ledger", "verify", str(tenant.root), "--json")
        assert (code, json.loads(out)) == (0, {name: expected[name]})
        url = f"{postgres_url}#{name}"
        code, out, _err = run_main(capsys, "ledger", "import", str(tenant.root), url, "--json")
        assert (code, json.loads(out)) == (0, {name: expected[name]})
        back = tmp_path / "back" / name
        code, out, _err = run_main(capsys, "ledger", "export", url, str(back), "--json")
        assert (code, json.loads(out)) == (0, {name: expected[name]})
        assert _files(back) == _files(tenant.root)
    assert [open_tenant(f"{postgres_url}#{n}").testimony_mode for n in "SMFL"] == [
        "salted", "mnemo", "rfc8785", "rfc8785",
    ]  # fmt: skip
    assert sorted(_files(tmp_path / "back" / "S")) == [
        "forgotten/s1.json", "ledger.jsonl", "memory/s2.json", "testimony.json",
    ]  # fmt: skip


def test_a_copy_that_is_not_ok_names_the_failing_records(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import whose copy verifies not ok (a record altered in the folder) prints the
    verdict and its ids in the error line, not just the chain state."""
    source = Tenant(tmp_path / "cc")
    source.save({"id": "a", "summary": "x"})
    source.save({"id": "b", "summary": "y"})
    (source.memory_dir / "b.json").write_text('{"id": "b", "summary": "edited"}')
    code, _out, err = run_main(capsys, "ledger", "import", str(source.root), postgres_url + "#cc")
    assert code == 1
    assert err.splitlines()[-1] == "error: cc: the copy is not ok: 1 altered: b"


def test_init_forget_and_all_on_database_urls(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial (MED 7, LOW 12): ``ledger init URL#NEW`` creates an empty database tenant
    (verify then exits 0); ``--salted`` there records the mode (a salted tenant then
    refuses another mode); witness/prove --bundle say a database tenant is not
    supported; ``--all URL#T`` is a usage error."""
    url = postgres_url + "#NEW"
    label = open_tenant(url).store.label  # type: ignore[union-attr]
    assert run_main(capsys, "ledger", "init", url) == (0, "rfc8785\n", "")
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    empty = _report(0, 0) | {"chain": "empty"}
    assert (code, json.loads(out)) == (0, {"NEW": empty})
    code, out, _err = run_main(capsys, "ledger", "init", url, "--json")
    assert (code, json.loads(out)) == (0, {"tenant": "NEW", "testimony": "rfc8785"})
    salted = postgres_url + "#S"
    assert run_main(capsys, "ledger", "init", salted, "--salted") == (0, "salted\n", "")
    code, out, err = run_main(capsys, "ledger", "init", salted, "--mnemo")
    assert (code, out) == (1, "")
    assert err == (
        f"error: {label[:-4]}#S: the tenant seals salted testimony (its recorded mode); it "
        "cannot change to 'mnemo' (its salted records would no longer verify)\n"
    )
    open_tenant(salted).save({"id": "s1", "summary": "x"})
    [(body,)] = open_tenant(salted).store.with_connection(  # type: ignore[union-attr]
        "read", lambda conn, t: conn.execute("SELECT body FROM mm_records").fetchall(), default=[]
    )
    assert b'"testimony_salt":' in bytes(body)
    code, out, err = run_main(capsys, "ledger", "init", url, "--salted")
    assert (code, out) == (0, "salted\n")  # still empty: it may become salted
    tenant = open_tenant(url)
    tenant.save({"id": "n3", "summary": "x"})
    key = tmp_path / "key"
    key.write_text(HmacKey("example.com/agents", bytes(range(32))).skey() + "\n")
    code, out, err = run_main(
        capsys, "ledger", "witness", url, "--origin", "o", "--key", str(key), "--url",
        "http://127.0.0.1:9",
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith("error: http://127.0.0.1:9/add-checkpoint: no answer")
    code, out, err = run_main(capsys, "ledger", "verify", "--all", url)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "merkle-memory ledger verify: error: --all takes a database URL without #tenant (to "
        f"visit one tenant, give it as TENANT): {url}"
    )


# --- trial 3 (issue 19): save, import into an empty tenant, recover, passwords -------------


def test_save_into_a_database_tenant_prints_what_a_folder_does(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Trial 3 finding 1: ``ledger save URL FILE``, ``--json`` and ``-`` (stdin) save into a
    database tenant with the folder's output: ``NAME: saved ID at seq N (HASH)`` and
    ``{"tenant", "file": "memory/<id>.json", "entry"}``."""
    url = postgres_url + "#cc"
    (tmp_path / "a.json").write_text('{"id": "a", "summary": "x"}')
    code, out, err = run_main(capsys, "ledger", "save", url, str(tmp_path / "a.json"))
    tenant = open_tenant(url)
    first = tenant.ledger.last()
    assert first is not None and (first.seq, first.memory_id) == (1, "a")
    assert (code, out, err) == (0, f"cc: saved a at seq 1 ({first.hash})\n", "")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"id": "b", "n": 1}')))
    code, out, err = run_main(capsys, "ledger", "save", url, "-", "--json")
    second = tenant.ledger.last()
    assert second is not None and second.seq == 2
    assert (code, err) == (0, "")
    assert json.loads(out) == {"tenant": "cc", "file": "memory/b.json", "entry": second.to_dict()}
    folder = tmp_path / "cc"
    code, out, _err = run_main(capsys, "ledger", "save", str(folder), str(tmp_path / "a.json"))
    assert (code, out.split(" (")[0]) == (0, "cc: saved a at seq 1")
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    assert (code, json.loads(out)) == (0, {"cc": _report(2, 2)})


def test_import_into_an_empty_initialized_tenant_when_the_modes_agree(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 3 finding 2: ``ledger import DIR URL`` fills an empty tenant made by ``ledger
    init`` (plain, ``--salted``, ``--mnemo``) when the folder's mode (recorded or implied)
    is the recorded one; another mode is refused naming both; a non-empty tenant still is."""
    salted = Tenant(tmp_path / "S", testimony="salted")
    salted.save({"id": "s1", "summary": "x"})
    mnemo = Tenant(tmp_path / "M", testimony="mnemo")
    mnemo.save({"id": "m1", "summary": "x"})
    plain = Tenant(tmp_path / "P")
    plain.save({"id": "p1", "summary": "x"})
    for tenant, flag in ((salted, "--salted"), (mnemo, "--mnemo"), (plain, None)):
        url = f"{postgres_url}#{tenant.name}"
        assert run_main(capsys, "ledger", "init", url, *([flag] if flag else []))[0] == 0
        code, out, err = run_main(capsys, "ledger", "import", str(tenant.root), url, "--json")
        assert (code, json.loads(out)) == (0, {tenant.name: _report(1, 1)}), err
    assert [open_tenant(f"{postgres_url}#{n}").testimony_mode for n in "SMP"] == [
        "salted", "mnemo", "rfc8785",
    ]  # fmt: skip
    agreed = postgres_url + "#Q"  # rfc8785 recorded; the folder's is implied (no testimony.json)
    assert run_main(capsys, "ledger", "init", agreed, "--testimony", "rfc8785")[0] == 0
    assert not (plain.root / "testimony.json").exists()
    code, out, _err = run_main(capsys, "ledger", "import", str(plain.root), agreed, "--json")
    assert (code, json.loads(out)) == (0, {"Q": _report(1, 1)})
    url = postgres_url + "#X"
    label = open_tenant(url).store.label  # type: ignore[union-attr]
    assert run_main(capsys, "ledger", "init", url, "--salted")[0] == 0
    code, out, err = run_main(capsys, "ledger", "import", str(plain.root), url)
    assert (code, out) == (1, "")
    assert err == (
        f"error: {label}: the empty tenant 'X' records testimony mode 'salted' (ledger "
        "init), the folder's is 'rfc8785': import into a new tenant, or one made with the "
        "folder's mode\n"
    )
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    assert (code, json.loads(out)) == (0, {"X": _report(0, 0) | {"chain": "empty"}})
    code, out, err = run_main(capsys, "ledger", "import", str(plain.root), postgres_url + "#P")
    assert (code, out) == (1, "")
    assert err.endswith("#P: tenant 'P' already holds a ledger or records\n")


def _roll_back(url: str) -> None:
    """Delete the last ledger line of the database tenant at ``url`` (the size follows):
    the head then records a seq the ledger lacks."""
    store = open_tenant(url).store

    def work(conn: Any, tenant: int) -> None:
        (start,) = conn.execute(
            "SELECT max(start) FROM mm_ledger_lines WHERE tenant_id = %s", (tenant,)
        ).fetchone()
        conn.execute(
            "DELETE FROM mm_ledger_lines WHERE tenant_id = %s AND start = %s", (tenant, start)
        )
        conn.execute("UPDATE mm_tenants SET size = %s WHERE id = %s", (start, tenant))

    store.with_connection("roll back", work, default=None)  # type: ignore[union-attr]


def _warned(label: str, old: int, now: int) -> str:
    """The WARNING line ``ledger recover`` logs on stderr for a database tenant."""
    return (
        f"warning: Ledger {label}: accepted a rollback from seq {old} to seq {now}; evidence in"
        " ledger.recovery-1.json\n"
    )


def test_a_rolled_back_database_tenant_is_recovered_in_place(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verify's hint for a rolled-back database tenant names ``ledger recover URL
    --accept-rollback`` (shell-quoted); following it accepts the rollback in place (one
    line, the record a row), verify lists the record, the lost entry's record is unsealed
    until sealed again, and a second recover has nothing to accept."""
    url = postgres_url + "#ps2"
    tenant = open_tenant(url)
    for i in range(3):
        tenant.save({"id": f"m{i}", "summary": str(i)})
    _roll_back(url)
    way_out = f"merkle-memory ledger recover {shlex.quote(url)} --accept-rollback"
    code, out, err = run_main(capsys, "ledger", "verify", url)
    assert code == 1
    assert err.splitlines()[-1] == (
        "error: ps2: not ok: ledger chain broken at seq 3: ledger.head records a later entry "
        f"(seq 3) than the ledger holds (last seq 2); if the loss is known and accepted: "
        f"{way_out}"
    )
    note = tmp_path / "m9.json"
    note.write_text('{"id":"m9"}')
    code, out, err = run_main(capsys, "ledger", "save", url, str(note))
    assert (code, out) == (1, "")
    assert err.endswith(f"refusing to append; if the loss is known and accepted: {way_out}\n")
    code, out, err = run_main(capsys, *shlex.split(way_out)[1:])
    assert (code, err) == (0, _warned(url, 3, 2))
    assert out == (
        f"{url}: accepted the rollback from seq 3 to seq 2 (lacking seq 3); evidence in "
        "ledger.recovery-1.json (mm_ledger_files); the next save is seq 3\n"
    )
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    assert (code, json.loads(out)) == (
        1,
        {
            "ps2": _report(2, 2, unsealed=["m2"])
            | {"accepted_rollbacks": ["ledger.recovery-1.json"]}
        },
    )
    assert run_main(capsys, "ledger", "seal", url)[0] == 0
    code, out, _err = run_main(capsys, "ledger", "verify", url)
    assert code == 0 and out.splitlines()[-1] == "  accepted rollback: ledger.recovery-1.json"
    code, out, err = run_main(capsys, "ledger", "recover", url, "--accept-rollback", "--json")
    assert (code, json.loads(out), err) == (0, {"accepted": False}, "")


def test_recover_json_of_a_database_tenant_names_the_row(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger recover URL --accept-rollback --json``: the folder's keys, ``record`` the
    row's name; the record's bytes are RFC 8785 JSON of kind ``accepted-rollback``."""
    url = postgres_url + "#pj"
    tenant = open_tenant(url)
    for i in range(3):
        tenant.save({"id": f"m{i}", "summary": str(i)})
    head = tenant.ledger.store.read_head()
    assert head is not None
    _roll_back(url)
    code, out, err = run_main(capsys, "ledger", "recover", url, "--accept-rollback", "--json")
    assert (code, err) == (0, _warned(url, 3, 2))
    assert json.loads(out) == {
        "accepted": True,
        "record": "ledger.recovery-1.json",
        "head": {"seq": 3, "hash": head.hash},
        "on_disk_seq": 2,
        "lacking": [3],
        "reused": False,
    }
    body = open_tenant(url).ledger.store.read_side_file("ledger.recovery-1.json")
    assert body is not None
    record = json.loads(body)
    assert (record["kind"], record["head"]["seq"], record["on_disk"]["entries"]) == (
        "accepted-rollback",
        3,
        2,
    )


def test_no_command_prints_a_database_password(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 3 finding 4: with ``postgres:hunter2@`` URLs, (a) the rollback hint of verify
    and the refusal of ``ledger recover``, (b) the JSON key of a second tenant of the same
    name and (c) the error prefix of a URL without ``#tenant`` show ``***``, never the
    password, on stdout or stderr."""
    secret = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")
    shown = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:***@")
    assert secret != postgres_url
    tenant = open_tenant(secret + "#s")
    for i in range(2):
        tenant.save({"id": f"m{i}", "summary": str(i)})
    other = secret + "&application_name=second#s"
    code, out, err = run_main(capsys, "ledger", "verify", secret + "#s", other, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "s": _report(2, 2),
        shown + "&application_name=second#s": _report(2, 2),
    }
    code, out, err = run_main(capsys, "ledger", "seal", secret + "#s", other)
    assert code == 0 and "hunter2" not in out + err
    assert out.splitlines()[2].startswith(f"{shown}&application_name=second#s: ok: chain")
    code, out, err = run_main(capsys, "ledger", "verify", secret)  # (c) no fragment
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {shown}: ") and "hunter2" not in err
    _roll_back(secret + "#s")
    code, out, err = run_main(capsys, "ledger", "verify", secret + "#s")
    assert code == 1 and "hunter2" not in out + err
    assert err.endswith(
        f"; if the loss is known and accepted: merkle-memory ledger recover "
        f"{shlex.quote(shown + '#s')} --accept-rollback\n"
    )
    code, out, err = run_main(capsys, "ledger", "recover", secret + "#s", "--accept-rollback")
    assert (code, err) == (0, _warned(shown + "#s", 2, 1)) and "hunter2" not in out
    assert out.startswith(f"{shown}#s: accepted the rollback from seq 2 to seq 1 ")


def test_a_rolled_back_database_tenant_is_never_published_or_signed(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line row deleted (size adjusted; the head row still names seq 3): tiles,
    checkpoint, prove and consistency exit 1 with verify's reason; nothing is published."""
    from servers import admin

    url = postgres_url + "#cc"
    tenant = open_tenant(url)
    for i in range(3):
        tenant.save({"id": f"m{i}", "summary": str(i)})
    with admin(postgres_url) as conn:
        conn.execute(
            "DELETE FROM mm_ledger_lines WHERE start = (SELECT max(start) FROM mm_ledger_lines)"
        )
        conn.execute(
            "UPDATE mm_tenants SET size = (SELECT sum(octet_length(line)) FROM mm_ledger_lines)"
        )
    reason = "ledger.head records a later entry (seq 3) than the ledger holds (last seq 2)"
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    assert (code, json.loads(out)["cc"]["reason"]) == (1, reason)
    key = tmp_path / "log.key"
    key.write_text(HmacKey("o", bytes(32)).skey() + "\n")
    label = tenant.ledger.store.label
    for argv in (
        ("tiles", url, str(tmp_path / "public"), "--origin", "o", "--key", str(key)),
        ("checkpoint", url, "--origin", "o", "--key", str(key)),
        ("prove", url, "--memory-id", "m0"),
        ("consistency", url, "--old-size", "1"),
    ):
        code, out, err = run_main(capsys, "ledger", *argv)
        assert (code, out) == (1, ""), argv
        assert err == (
            f"error: {label}: ledger chain broken at seq 3: {reason}; nothing is proven or "
            "signed; if the loss is known and accepted: merkle-memory ledger recover "
            f"{shlex.quote(label)} --accept-rollback\n"
        ), argv
    assert not (tmp_path / "public" / "checkpoint").exists()


def test_recover_of_a_missing_database_tenant_is_refused(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger recover URL --accept-rollback`` for a tenant the database does not hold: one
    error line, exit 1 (as a missing folder), and no tenant is created."""
    url = postgres_url + "#nobody"
    code, out, err = run_main(capsys, "ledger", "recover", url, "--accept-rollback")
    store = PostgresLedgerStore(url)
    assert (code, out, err) == (
        1,
        "",
        f"error: {store.label}: no tenant 'nobody' in the database\n",
    )
    assert not store.exists()
