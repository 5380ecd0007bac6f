"""Benchmark: importing a synthetic Claude Code transcript, beside the floor "json.loads of
every line", measured in one run (issue 6 item 5).

For each case the script measures wall time (best of ``--repeat`` runs, untraced) and peak
Python heap (one extra run under ``tracemalloc``):

* ``json_loads``: ``json.loads`` of every line, results dropped (the parsing floor);
* ``import``: ``transcripts.import_file`` plus adding every node to a ``Forest``;
* ``import_store``: the same plus ``put_many`` into a fresh SQLite node store file.

Usage::

    python benchmarks/bench_import.py            # 100,000 turns
    python benchmarks/bench_import.py --quick    # 5,000 turns
    python benchmarks/bench_import.py --turns 20000 --json out.json

The functions are importable (``run(turns)`` returns the result dict).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_transcript import generate

from merkle_memory.dag import Forest
from merkle_memory.nodestore import open_store
from merkle_memory.transcripts import import_file

__all__ = ["bench_import", "bench_import_store", "bench_json_loads", "measure", "run"]


def bench_json_loads(path: Path) -> int:
    """The floor: ``json.loads`` of every line; returns the line count."""
    count = 0
    with open(path, "rb") as handle:
        for raw in handle:
            json.loads(raw)
            count += 1
    return count


def bench_import(path: Path) -> int:
    """Import the transcript into a Forest; returns the node count."""
    forest = Forest()
    for node in import_file(path, "claude-code").nodes:
        forest.add(node)
    return len(forest)


def bench_import_store(path: Path) -> int:
    """Import and store every node in a new SQLite file (one transaction); returns new nodes."""
    with tempfile.TemporaryDirectory() as folder:
        result = import_file(path, "claude-code")
        with open_store(Path(folder) / "nodes.db") as store:
            return store.put_many(result.nodes)


def measure(func: Callable[[Path], int], path: Path, repeat: int) -> dict[str, Any]:
    """Best wall time over ``repeat`` untraced runs, then peak traced heap of one run."""
    times: list[float] = []
    value = 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        value = func(path)
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    func(path)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": round(min(times), 4), "peak_mib": round(peak / 2**20, 2), "count": value}


def run(turns: int, repeat: int = 1, seed: int = 0) -> dict[str, Any]:
    """Generate a ``turns``-turn transcript in a temp folder and measure the three cases.

    Returns:
        ``{"turns", "lines", "file_mib", "python", "cases": {name: {"seconds", "peak_mib",
        "count", "turns_per_s"}}}``.
    """
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            lines = generate(handle, turns, seed)
        cases: dict[str, Any] = {}
        for name, func in (
            ("json_loads", bench_json_loads),
            ("import", bench_import),
            ("import_store", bench_import_store),
        ):
            result = measure(func, path, repeat)
            result["turns_per_s"] = round(turns / result["seconds"]) if result["seconds"] else None
            cases[name] = result
            print(f"{name:>13}: {result}", file=sys.stderr)
        return {
            "turns": turns,
            "lines": lines,
            "file_mib": round(path.stat().st_size / 2**20, 2),
            "python": platform.python_version(),
            "cases": cases,
        }


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description="import benchmark")
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="5,000 turns")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", metavar="OUT", help="also write the result to this file")
    args = parser.parse_args(argv)
    result = run(5_000 if args.quick else args.turns, args.repeat)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
