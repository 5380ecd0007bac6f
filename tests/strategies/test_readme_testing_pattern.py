"""The README's Hypothesis + temporary folder pattern runs as written, and the mistake it
warns about (``tmp_path`` inside ``@given``) fails Hypothesis's health check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support import REPO

_BLOCK = re.compile(r"<!-- testing-pattern -->\n```python\n(.*?)```\n", re.S)

_MISTAKE = """

@settings(deadline=None)
@given(memory=memories())
def test_the_mistake(tmp_path, memory):
    MemoryBank(tmp_path).save(memory)
"""


def test_readme_pattern_passes_and_tmp_path_fails_the_health_check(tmp_path: Path) -> None:
    """The README block, run by pytest as a test file of its own: its two tests pass; the
    same file with a test taking tmp_path under @given fails with the
    function_scoped_fixture health check, as the README says."""
    blocks = _BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) == 1
    quick = "from hypothesis import settings as _s\n_s.register_profile('q', max_examples=8)\n"
    quick += "_s.load_profile('q')\n"
    (tmp_path / "test_pattern.py").write_text(quick + blocks[0] + _MISTAKE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_pattern.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout
    assert "FAILED test_pattern.py::test_the_mistake" in run.stdout
    assert "function_scoped_fixture" in run.stdout
    assert run.stdout.splitlines()[-1].startswith("1 failed, 2 passed")
