"""``ledger verify|seal|prove|consistency|checkpoint|export|import`` given
``postgresql://...#tenant`` URLs: the same documents and exit codes as on folders.

Needs the test server (tests/servers.py): skipped without it, failed under CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.errors import TenantError
from merkle_memory.ledger import Tenant, list_postgres_tenants, open_tenant
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
    assert code == 1 and "no such tenant" in err


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


def test_import_refuses_salted_mnemo_and_forgotten_tenants_before_writing(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial (HIGH 3, MED 6): a salted or mnemo tenant (testimony.json), one with a
    tombstone in forgotten/, and one whose ledger alone holds a forget entry are refused
    with one line naming why, exit 1, and no database tenant is created."""
    salted = Tenant(tmp_path / "S", testimony="salted")
    salted.save({"id": "s1", "summary": "my card ends in 4242"})
    mnemo = Tenant(tmp_path / "M", testimony="mnemo")
    mnemo.save({"id": "m1", "summary": "x"})
    forgot = Tenant(tmp_path / "F")
    forgot.save({"id": "f1", "summary": "x"})
    forgot.save({"id": "f2", "summary": "y"})
    forgot.forget("f1", "asked")
    lost = Tenant(tmp_path / "L")
    lost.save({"id": "l1", "summary": "x"})
    lost.forget("l1", "asked")
    (lost.root / "forgotten" / "l1.json").unlink()
    (lost.root / "forgotten").rmdir()
    cases = {
        salted: "a salted tenant cannot be copied to PostgreSQL yet (testimony.json)",
        mnemo: "a mnemo tenant cannot be copied to PostgreSQL yet (testimony.json)",
        forgot: "a tenant with forgotten records cannot be copied to PostgreSQL yet "
        "(forgotten/f1.json: tombstones have no place there)",
        lost: "a tenant with forgotten records cannot be copied to PostgreSQL yet "
        '(its ledger holds op: "forget" entries)',
    }
    for tenant, why in cases.items():
        url = f"{postgres_url}#{tenant.name}"
        code, out, err = run_main(capsys, "ledger", "import", str(tenant.root), url)
        assert (code, out, err) == (1, "", f"error: {tenant.root}: {why}\n")
    assert list_postgres_tenants(postgres_url) == []


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


def test_init_forget_all_and_folder_only_commands_on_database_urls(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial (MED 7, LOW 12): ``ledger init URL#NEW`` creates an empty database tenant
    (verify then exits 0); ``--salted`` there is refused; ``ledger forget URL#T`` and the
    API refuse with TenantError naming the URL unmangled; witness/prove --bundle say
    a database tenant is not supported; ``--all URL#T`` is a usage error."""
    url = postgres_url + "#NEW"
    label = open_tenant(url).store.label  # type: ignore[union-attr]
    assert run_main(capsys, "ledger", "init", url) == (0, "rfc8785\n", "")
    code, out, _err = run_main(capsys, "ledger", "verify", url, "--json")
    empty = _report(0, 0) | {"chain": "empty"}
    assert (code, json.loads(out)) == (0, {"NEW": empty})
    code, out, _err = run_main(capsys, "ledger", "init", url, "--json")
    assert (code, json.loads(out)) == (0, {"tenant": "NEW", "testimony": "rfc8785"})
    code, out, err = run_main(capsys, "ledger", "init", postgres_url + "#S", "--salted")
    assert (code, out) == (1, "")
    assert err == (
        f"error: {label[:-4]}#S: a postgresql:// tenant seals rfc8785 testimony only (yet), "
        "not salted\n"
    )
    tenant = open_tenant(url)
    tenant.save({"id": "n3", "summary": "x"})
    why = (
        "forgetting is not supported for a postgresql:// tenant yet (no place for "
        "tombstones): export it to a folder (merkle-memory ledger export) to forget there"
    )
    with pytest.raises(TenantError) as info:
        tenant.forget("n3", "asked")
    assert (info.value.reason, info.value.path) == (why, label)
    code, out, err = run_main(capsys, "ledger", "forget", url, "n3", "--reason", "asked")
    assert (code, out, err) == (1, "", f"error: {label}: {why}\n")
    folder_only = (
        f"error: {url}: a postgresql:// tenant is not supported by "
        "`ledger witness` or `ledger prove --bundle` yet; export it to a folder first "
        "(merkle-memory ledger export)\n"
    )
    key = tmp_path / "key"
    key.write_text(HmacKey("example.com/agents", bytes(range(32))).skey() + "\n")
    for argv in (
        ("witness", url, "--origin", "o", "--key", str(key), "--url", "http://127.0.0.1:9"),
    ):
        code, out, err = run_main(capsys, "ledger", *argv)
        assert (code, out, err.splitlines()[-1] + "\n") == (1, "", folder_only), argv
    code, out, err = run_main(
        capsys, "ledger", "prove", url, "--memory-id", "n3", "--bundle", "-", "--origin", "o",
        "--key", str(key),
    )  # fmt: skip
    assert (code, out, err) == (1, "", folder_only)
    code, out, err = run_main(capsys, "ledger", "verify", "--all", url)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "merkle-memory ledger verify: error: --all takes a database URL without #tenant (to "
        f"visit one tenant, give it as TENANT): {url}"
    )
