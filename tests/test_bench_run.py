"""benchmarks/run.py: discovery, flattening into one table, ratios, and failure isolation."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def _runner() -> Any:
    spec = importlib.util.spec_from_file_location("_bench_runner", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _runner()

GOOD = """
import json, sys
from pathlib import Path
def main(argv):
    quick = "--quick" in argv
    out = argv[argv.index("--json") + 1]
    print("noise on stdout")
    rows = [{"corpus": "c", "impl": "ours", "median_us": 2.0, "vs_floor": 1.25, "ok": True}]
    doc = {"quick": quick, "rows": rows, "points": [{"n": 10, "seconds": 0.5}]}
    Path(out).write_text(json.dumps(doc))
    return 0
"""

BAD = """
def main(argv):
    raise RuntimeError("boom")
"""


def test_flatten_names_numbers_by_their_path() -> None:
    """Numbers are flattened to paths; list rows are named by string fields or n; bools and
    labels are not figures."""
    doc = {"rows": [{"corpus": "c", "impl": "ours", "median_us": 2.0, "ok": True}], "x": 3}
    doc["points"] = [{"n": 10, "seconds": 0.5}]
    assert runner.flatten(doc) == [
        ("rows/c/ours/median_us", 2.0),
        ("x", 3),
        ("points/n=10/seconds", 0.5),
    ]


def test_ratio_metrics_are_recognised() -> None:
    """vs_*, *ratio*, *speedup* and flatness are ratios; times and counts are not."""
    assert runner.is_ratio("a/b/vs_floor") and runner.is_ratio("ops/x/flatness")
    assert runner.is_ratio("a/ours_speedup") and runner.is_ratio("a/size_ratio")
    assert not runner.is_ratio("a/vs/median_us") and not runner.is_ratio("a/seconds")


def test_run_one_collects_json_and_isolates_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A benchmark's JSON is collected (its stdout diverted to stderr); a failing one is
    reported as an error instead of stopping the run."""
    good, bad = tmp_path / "bench_good.py", tmp_path / "bench_bad.py"
    good.write_text(GOOD)
    bad.write_text(BAD)
    ok = runner.run_one(good, quick=True)
    failed = runner.run_one(bad, quick=False)
    captured = capsys.readouterr()
    assert "noise on stdout" not in captured.out and "noise on stdout" in captured.err
    assert ok["name"] == "good" and ok["result"]["quick"] is True
    assert failed["error"] == "RuntimeError: boom" and "result" not in failed
    runner.print_table([ok, failed])
    table = capsys.readouterr().out
    assert "rows/c/ours/vs_floor" in table and "1.250x" in table
    assert "ERROR" in table and "RuntimeError: boom" in table


def test_discover_lists_the_scaling_benchmark() -> None:
    """run.py finds the bench_*.py files beside it, bench_scaling.py among them."""
    names = [p.name for p in runner.discover()]
    assert "bench_scaling.py" in names and names == sorted(names)
    assert [p.name for p in runner.discover(["scaling"])] == ["bench_scaling.py"]


def test_scaling_reports_flatness_and_skips_over_budget() -> None:
    """scale() measures each size, computes max/min time per item, and skips a size whose
    projected time exceeds the budget."""
    spec = importlib.util.spec_from_file_location("_bench_scaling", RUN.parent / "bench_scaling.py")
    assert spec is not None and spec.loader is not None
    scaling = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scaling)
    calls: list[int] = []

    def op(n: int) -> Iterator[int]:
        calls.append(n)
        for _ in range(0, n, 10):
            yield 10  # ten items per chunk

    result = scaling.scale(op, [10, 100, 10**12], budget=1.0)
    assert calls == [10, 100]
    assert [p["n"] for p in result["points"]] == [10, 100, 10**12]
    assert "skipped" in result["points"][2]
    assert result["flatness"] >= 1.0 and isinstance(result["flat"], bool)
    assert json.dumps(result)  # JSON-serializable as run.py writes it
