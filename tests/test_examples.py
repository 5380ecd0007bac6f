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


def _run(script: Path, cwd: Path, *, stdin: bool) -> subprocess.CompletedProcess[str]:
    """Run ``python SCRIPT`` or ``python - < SCRIPT`` (as a notebook cell would, with no
    ``__file__``) in ``cwd``, with the checkout on PYTHONPATH."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, "-"] if stdin else [sys.executable, str(script)]
    return subprocess.run(
        argv, input=script.read_text(encoding="utf-8") if stdin else None,
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("stdin", [False, True], ids=["by-path", "stdin"])
@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_example_runs(script: Path, tmp_path: Path, stdin: bool) -> None:
    """The script exits 0 from an unrelated working directory, run by path or fed on stdin
    (``python - < examples/X.py``), without a traceback."""
    proc = _run(script, tmp_path, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip()


def test_quickstart_output_is_the_same_anywhere(tmp_path: Path) -> None:
    """Fed on stdin in a folder without the example transcript, the quick start rebuilds the
    session from its embedded lines and prints exactly what it prints beside the example
    file: same counts, same leaf ids."""
    script = REPO / "examples" / "quickstart.py"
    beside = _run(script, REPO / "examples", stdin=False)
    elsewhere = _run(script, tmp_path, stdin=True)
    assert beside.returncode == elsewhere.returncode == 0, elsewhere.stderr
    assert "not found" not in elsewhere.stdout
    assert elsewhere.stdout == beside.stdout
    assert "claude_code_session.jsonl: 13 messages, 2 other lines -> 10 nodes" in beside.stdout
    assert list(tmp_path.iterdir()) == []  # the temporary transcript is gone


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
