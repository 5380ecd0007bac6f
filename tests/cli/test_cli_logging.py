"""The command line shows the library's log warnings as ``warning:`` lines, silenced by -q."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from merkle_memory.cli import main


def _torn_tenant(root: Path) -> Path:
    tenant = root / "t"
    (tenant / "memory").mkdir(parents=True)
    (tenant / "memory" / "a.json").write_text(json.dumps({"id": "a", "summary": "x"}))
    assert main(["ledger", "seal", str(tenant), "-q"]) == 0
    with (tenant / "ledger.jsonl").open("ab") as handle:
        handle.write(b'{"seq":2,"ts')  # a crash mid-append
    return tenant


def test_torn_tail_warning_is_one_prefixed_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Quarantining a torn tail during seal prints exactly one ``warning:`` line on stderr."""
    tenant = _torn_tenant(tmp_path)
    capsys.readouterr()
    assert main(["ledger", "seal", str(tenant)]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "torn tail (12 bytes at offset" in warnings[0]
    assert (tenant / "ledger.torn").read_bytes().endswith(b'{"seq":2,"ts\n')


@pytest.mark.parametrize("quiet", [["-q"], ["--quiet"]])
def test_quiet_silences_library_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], quiet: list[str]
) -> None:
    """With -q the same seal prints nothing on stderr, and the quarantine still happens."""
    tenant = _torn_tenant(tmp_path)
    capsys.readouterr()
    assert main(["ledger", "seal", str(tenant), *quiet]) == 0
    assert capsys.readouterr().err == ""
    assert (tenant / "ledger.torn").exists()


def test_handler_is_removed_after_each_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() leaves the ``merkle_memory`` logger as it found it (safe to call repeatedly)."""
    import logging

    logger = logging.getLogger("merkle_memory")
    before = (list(logger.handlers), logger.propagate)
    _torn_tenant(tmp_path)
    assert main(["canon", "--hash", str(tmp_path / "t" / "memory" / "a.json")]) == 0
    assert (list(logger.handlers), logger.propagate) == before
