"""Every script in examples/ runs to completion in a fresh process (and fast)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "examples").glob("*.py"))


def test_examples_exist() -> None:
    """The quick start is among the example scripts."""
    assert REPO / "examples" / "quickstart.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    """The script exits 0 from an unrelated working directory, without a traceback."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip()


def test_quickstart_shows_what_it_promises(tmp_path: Path) -> None:
    """The quick start shows the id kept under a <system-reminder> and the example's leaves.

    Run without PYTHONPATH: the script finds the checkout it sits in by itself.
    """
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "the turn keeps its id: True" in proc.stdout
    assert "claude_code_session.jsonl: 13 messages, 2 other lines -> 10 nodes" in proc.stdout
    assert proc.stdout.count("   leaf ") == 4
