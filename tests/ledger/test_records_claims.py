"""Two record files claiming one id: the file named ``<id>.json`` speaks for the id."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support import run_main

from merkle_memory.ledger.tenant import Tenant


def _write(path: Path, record: dict[str, str]) -> None:
    path.write_text(json.dumps(record), encoding="utf-8")


def test_a_save_after_a_misnamed_claimant_keeps_the_tenant_ok(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``memory/y.json`` holding id ``x`` is adopted as ``x`` (mnemo names files freely); a later
    ``save`` of ``x`` writes ``x.json``, which then speaks for ``x``: verify stays ok and warns
    that ``y.json`` is ignored."""
    tenant = Tenant(tmp_path / "t")
    (tenant.root / "memory").mkdir(parents=True)
    _write(tenant.root / "memory" / "y.json", {"id": "x", "summary": "first"})
    assert tenant.seal().to_dict()["sealed_ids"] == ["x"]
    tenant.save({"id": "x", "summary": "second"})
    with caplog.at_level(logging.WARNING, logger="merkle_memory"):
        report = tenant.verify().to_dict()
    assert (report["ok"], report["sealed"], report["altered"], report["entries"]) == (
        True,
        1,
        [],
        2,
    )
    assert any("y.json claims id 'x'" in r.getMessage() for r in caplog.records)


def test_two_misnamed_claimants_match_nothing(tmp_path: Path) -> None:
    """Neither ``a.json`` nor ``b.json`` is named after id ``x``: with different testimony
    the id matches nothing, so its sealed entry reads altered."""
    tenant = Tenant(tmp_path / "t")
    (tenant.root / "memory").mkdir(parents=True)
    _write(tenant.root / "memory" / "a.json", {"id": "x", "summary": "one"})
    assert tenant.seal().to_dict()["sealed_ids"] == ["x"]
    _write(tenant.root / "memory" / "b.json", {"id": "x", "summary": "two"})
    report = tenant.verify().to_dict()
    assert (report["ok"], report["altered"]) == (False, ["x"])


def test_the_named_file_wins_whatever_the_listing_order(tmp_path: Path) -> None:
    """``x.json`` sorts after ``a.json`` here and before ``z.json`` in the next case; either
    way ``x.json`` speaks for ``x``."""
    for other in ("a.json", "z.json"):
        tenant = Tenant(tmp_path / other)
        tenant.save({"id": "x", "summary": "real"})
        _write(tenant.root / "memory" / other, {"id": "x", "summary": "impostor"})
        report = tenant.verify().to_dict()
        assert (report["ok"], report["sealed"], report["altered"]) == (True, 1, [])


def _report(**changes: Any) -> dict[str, Any]:
    """The tenant report of ``_forged`` (one sealed record ``x``), with ``changes``."""
    base: dict[str, Any] = {
        "ok": True,
        "chain": "intact",
        "entries": 1,
        "broken_at": None,
        "reason": None,
        "sealed": 1,
        "altered": [],
        "missing": [],
        "unsealed": [],
        "disputed": [],
    }
    return base | changes


def _forged(tmp_path: Path, *forgeries: str) -> Tenant:
    """A tenant whose record ``x`` is sealed, plus a forged claimant of ``x`` per file name."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "real"})
    for name in forgeries:
        _write(tenant.memory_dir / name, {"id": "x", "summary": f"forged in {name}"})
    return tenant


def test_an_ignored_claimant_is_in_the_verify_and_seal_reports(tmp_path: Path) -> None:
    """Issue 14 (smaller): a second file claiming a sealed id with forged content is named in
    the report as ``ignored_claimants``; every other key keeps the value it has without it."""
    tenant = _forged(tmp_path)
    assert tenant.verify().to_dict() == _report()  # no claimant: no key
    _write(tenant.memory_dir / "z.json", {"id": "x", "summary": "forged"})
    claimants = [{"id": "x", "file": "memory/z.json"}]
    assert tenant.verify().to_dict() == _report(ignored_claimants=claimants)
    assert tenant.verify().ignored_claimants == (("x", "memory/z.json"),)
    sealed = tenant.seal().to_dict()
    assert sealed == _report(ignored_claimants=claimants, sealed_now=0, sealed_ids=[])


def test_the_named_file_speaks_even_after_two_impostors(tmp_path: Path) -> None:
    """``a.json`` and ``b.json`` (listed first, differing from each other) both claim ``x``;
    ``x.json`` still speaks for ``x`` and both impostors are listed."""
    tenant = _forged(tmp_path, "a.json", "b.json")
    claimants = [{"id": "x", "file": "memory/a.json"}, {"id": "x", "file": "memory/b.json"}]
    assert tenant.verify().to_dict() == _report(ignored_claimants=claimants)


def test_a_claimant_agreeing_with_the_named_file_is_not_listed(tmp_path: Path) -> None:
    """A copy that testifies what ``x.json`` testifies (filing fields may differ) hides
    nothing: it is not an ignored claimant."""
    tenant = _forged(tmp_path)
    _write(tenant.memory_dir / "copy.json", {"id": "x", "summary": "real", "filed": "2026"})
    assert tenant.verify().to_dict() == _report()


def test_cli_shows_ignored_claimants_in_json_and_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger verify --json`` and ``ledger seal --json`` carry ``ignored_claimants``; the
    text output names the file; the tenant stays ok (exit 0)."""
    tenant = _forged(tmp_path, "z.json")
    claimants = [{"id": "x", "file": "memory/z.json"}]
    code, out, err = run_main(capsys, "ledger", "verify", str(tenant.root), "--json")
    assert (code, json.loads(out)) == (0, {"t": _report(ignored_claimants=claimants)})
    assert "warning: record" in err and "z.json claims id 'x'" in err
    code, out, _err = run_main(capsys, "ledger", "seal", str(tenant.root), "--json")
    expected = _report(ignored_claimants=claimants, sealed_now=0, sealed_ids=[])
    assert (code, json.loads(out)) == (0, {"t": expected})
    code, out, _err = run_main(capsys, "ledger", "verify", str(tenant.root))
    assert (code, out.splitlines()) == (
        0,
        [
            "t: ok: chain intact (1 entry) · sealed 1 · altered 0 · missing 0 · unsealed 0"
            " · disputed 0",
            "  ignored claimants: memory/z.json (claims x)",
        ],
    )


def test_a_refused_seal_still_lists_ignored_claimants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger seal --json`` on a broken chain gives the report keys, claimants included."""
    tenant = _forged(tmp_path, "z.json")
    ledger = tenant.root / "ledger.jsonl"
    ledger.write_bytes(ledger.read_bytes() * 2)
    code, out, _err = run_main(capsys, "ledger", "seal", str(tenant.root), "--json")
    document = json.loads(out)["t"]
    assert code == 1
    assert (document["chain"], document["ignored_claimants"]) == (
        "broken",
        [{"id": "x", "file": "memory/z.json"}],
    )
