"""`merkle-memory ledger verify|seal` (DESIGN section 7, issue 3 item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import ledger_report

from merkle_memory.cli import main
from merkle_memory.ledger.tenant import Tenant

KEYS = set(ledger_report())


def root_with(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / "agents" / name / "memory").mkdir(parents=True)
    return tmp_path


def test_verify_all_json_is_pure_and_skips_non_tenants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--all --json: stdout is one JSON object keyed by tenant name with exactly the report
    keys; skip notices go to stderr; exit 1 because rocky's record is unsealed (its report
    is ok: nothing is altered, but nothing protects the record), with an error line."""
    root = root_with(tmp_path, "rocky", "cc", "rocky.archived-20260516")
    Tenant(root / "agents" / "cc").save({"id": "a", "summary": "x"})
    (root / "agents" / "rocky" / "memory" / "r.json").write_text('{"id": "r"}')
    assert main(["ledger", "verify", "--all", str(root), "--json"]) == 1
    out, err = capsys.readouterr()
    assert (
        f"error: rocky: not sealed: 1 record without a ledger entry (not protected); run: "
        f"merkle-memory ledger seal {root / 'agents' / 'rocky'}\n"
    ) in err
    reports = json.loads(out)
    assert set(reports) == {"cc", "rocky"}
    assert set(reports["cc"]) == KEYS and reports["cc"]["sealed"] == 1
    assert reports["rocky"]["unsealed"] == ["r"] and reports["rocky"]["chain"] == "empty"
    assert "skipped rocky.archived-20260516" in err


def test_seal_json_adds_sealed_now_and_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """seal --json adds sealed_now and sealed_ids to each report."""
    root = root_with(tmp_path, "cc")
    (root / "agents" / "cc" / "memory" / "x.json").write_text('{"id": "x", "summary": "far"}')
    assert main(["ledger", "seal", str(root / "agents" / "cc"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["cc"]
    assert set(report) == KEYS | {"sealed_now", "sealed_ids"}
    assert (report["sealed_now"], report["sealed_ids"], report["sealed"]) == (1, ["x"], 1)


def test_seal_all_continues_past_a_refused_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken tenant is refused (exit 1, report with error), the others still seal."""
    root = root_with(tmp_path, "aa", "bb")
    aa = Tenant(root / "agents" / "aa")
    aa.save({"id": "a1", "summary": "x"})
    aa.save({"id": "a2", "summary": "y"})
    lines = aa.ledger.path.read_text().splitlines()
    aa.ledger.path.write_text(lines[1] + "\n")
    (root / "agents" / "bb" / "memory" / "b.json").write_text('{"id": "b"}')
    assert main(["ledger", "seal", "--all", str(root), "--json"]) == 1
    out, err = capsys.readouterr()
    reports = json.loads(out)
    assert reports["aa"]["chain"] == "broken" and "error" in reports["aa"]
    assert reports["bb"]["sealed_ids"] == ["b"]
    assert "error: aa:" in err and "refusing to adopt" in err
    assert "aa: aa:" not in err  # the tenant is named once
    assert reports["aa"]["error"].startswith("ledger chain broken at seq 1: ")


def test_text_output_lists_at_most_eight_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text output names up to 8 ids per verdict; not ok gives exit 1."""
    t = Tenant(tmp_path / "t")
    for i in range(10):
        t.save({"id": f"m{i}", "summary": "x"})
    for i in range(10):
        (t.memory_dir / f"m{i}.json").unlink()
    assert main(["ledger", "verify", str(t.root)]) == 1
    out = capsys.readouterr().out
    assert "t: NOT OK: chain intact (10 entries)" in out
    assert "  missing: m0, m1, m2, m3, m4, m5, m6, m7 (+2 more)" in out


def test_usage_and_no_tenants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Neither or both of TENANT and --all is a usage error (2); --all with none is 1."""
    assert main(["ledger", "verify"]) == 2
    assert main(["ledger", "seal", "x", "--all", str(tmp_path)]) == 2
    assert main(["ledger", "verify", "--all", str(tmp_path)]) == 1
    assert "no tenants" in capsys.readouterr().err


def test_missing_tenant_folder_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TENANT that does not exist gives one error line and exit 1; the others still run."""
    ok = tmp_path / "ok"
    (ok / "memory").mkdir(parents=True)
    (ok / "memory" / "r.json").write_text('{"id": "r"}')
    assert main(["ledger", "seal", str(tmp_path / "nope"), str(ok), "--json"]) == 1
    out, err = capsys.readouterr()
    reports = json.loads(out)
    assert set(reports) == {"nope", "ok"} and reports["ok"]["sealed_ids"] == ["r"]
    assert err == "error: nope: does not exist\n"  # the name once, not the path again


NOT_A_TENANT = "not a tenant folder (no memory/ and no ledger.jsonl)"


@pytest.mark.parametrize("verb", ["verify", "seal"])
def test_a_folder_that_is_not_a_tenant_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    """verify/seal of a folder with neither memory/ nor ledger.jsonl (a multi-tenant root's
    agents/ folder, say): one exact error line, exit 1, no "ok", and seal creates nothing."""
    agents = tmp_path / "agents"
    Tenant(agents / "cc").save({"id": "a", "summary": "x"})
    before = sorted(p.name for p in agents.iterdir())
    assert main(["ledger", verb, str(agents)]) == 1
    assert capsys.readouterr() == ("", f"error: agents: {NOT_A_TENANT}\n")
    assert main(["ledger", verb, str(agents), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"agents": {"ok": False, "error": NOT_A_TENANT}}
    assert err == f"error: agents: {NOT_A_TENANT}\n"
    assert sorted(p.name for p in agents.iterdir()) == before == ["cc"]


def test_memory_that_is_a_file_is_not_a_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `memory` file instead of a folder: without a ledger the folder is not a tenant;
    with one, `memory is not a folder`. Exit 1 both, never a traceback."""
    t = tmp_path / "t"
    t.mkdir()
    (t / "memory").write_text("x")
    assert main(["ledger", "verify", str(t)]) == 1
    assert capsys.readouterr() == ("", f"error: t: {NOT_A_TENANT}\n")
    (t / "ledger.jsonl").write_bytes(b"")
    assert main(["ledger", "seal", str(t)]) == 1
    assert capsys.readouterr() == ("", "error: t: memory is not a folder\n")


def test_seal_names_each_skipped_record_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records seal cannot adopt (a symlink, unparseable, a big integer) are named with their
    reason on one warning line; -q drops it; they stay unsealed."""
    t = tmp_path / "t"
    (t / "memory").mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text('{"id": "a"}')
    (t / "memory" / "a.json").symlink_to(tmp_path / "elsewhere.json")
    (t / "memory" / "b.json").write_text("{")
    (t / "memory" / "c.json").write_text('{"id": "c", "summary": 1152921504606846976}')
    assert main(["ledger", "seal", str(t), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["t"]["unsealed"] == ["a", "b", "c"]
    assert err == (
        "warning: t: could not seal 3: a (a symbolic link (never followed)), b (unparseable "
        "record (Expecting property name enclosed in double quotes: line 1 column 2 (char "
        "1))), c (a sealed value outside RFC 8785)\n"
    )
    assert main(["ledger", "seal", str(t), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_subprocess_run(tmp_path: Path) -> None:
    """python -m merkle_memory ledger verify runs end to end."""
    Tenant(tmp_path / "cc").save({"id": "a", "summary": "x"})
    proc = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "ledger", "verify", str(tmp_path / "cc"), "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cc"]["chain"] == "intact"


def test_seal_json_on_a_rollback_gives_the_report_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rollback refused by ``ledger seal --json`` prints the documented report keys (the
    tenant's verify report, ``ok`` false, ``sealed_now`` 0) plus ``error``, not only
    ``{ok, error}``."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "a", "summary": "a"})
    lines = (tenant.root / "ledger.jsonl").read_bytes()
    tenant.save({"id": "b", "summary": "b"})
    (tenant.root / "ledger.jsonl").write_bytes(lines)
    assert main(["ledger", "seal", str(tenant.root), "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)["t"]
    message = report.pop("error")
    assert "went backwards" in message and err == f"error: t: {message}\n"
    assert report == {
        "ok": False,
        "chain": "broken",
        "entries": 1,
        "broken_at": 2,
        "reason": "ledger.head records a later entry (seq 2) than the ledger holds (last seq 1)",
        "sealed": 1,
        "altered": [],
        "missing": [],
        "unsealed": ["b"],
        "disputed": [],
        "sealed_now": 0,
        "sealed_ids": [],
    }
