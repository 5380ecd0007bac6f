"""``ledger verify|seal|prove|consistency|checkpoint|export|import`` given
``postgresql://...#tenant`` URLs: the same documents and exit codes as on folders.

Needs the test server (tests/servers.py): skipped without it, failed under CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.ledger import Tenant, open_tenant


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
