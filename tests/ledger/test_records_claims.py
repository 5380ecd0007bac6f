"""Two record files claiming one id: the file named ``<id>.json`` speaks for the id."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

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
