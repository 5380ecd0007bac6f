"""Benchmark: importing a synthetic Claude Code transcript, beside the floor "json.loads of
every line", measured in one run (issue 6 item 5, issue 8 item 3, issue 15 item 4).

Each case runs in a fresh child process (so one case's memory cannot hide in another's), which
reports its best wall time over ``--repeat`` runs and its CPU time (``process_time``: on a
shared machine the wall time also counts the waits for a core, the CPU time much less), its
peak resident memory (``ru_maxrss``) and its resident memory at the end while the result is
still alive (Linux ``/proc``; ``null`` elsewhere). The library is loaded before the clock
starts, in every case:

* ``json_loads``: ``json.loads`` of every line, results dropped (the floor);
* ``import``: ``transcripts.import_file`` plus adding every node to a ``Forest``;
* ``import_store``: ``import_file`` plus ``put_many`` into a fresh SQLite node store file;
* ``cli_import_store``: ``merkle-memory dag import FILE --store DB`` in process (detection,
  subagent / compact-boundary linking, forest, store).

The cases alternate, round after round (``--repeat`` rounds, 3 by default), each run in a fresh
process; ``ratios`` are each case's time over ``json_loads``'s in the same round (library time /
floor time, lower is better), median and spread, in wall time and in CPU time (``(cpu)``).
The transcript is synthetic by design (a size beyond the real samples) with the content sizes
of real sessions by default
(``gen_transcript.py --content realistic``: 40,000 turns, about 116 MiB, tool results copied
into ``toolUseResult``, thinking blocks, Edit inputs); ``--content small`` gives the short lines
of earlier runs, where the fixed cost of a node dominates. ``real_sessions`` then imports the
real Claude Code sessions of ``../shared/real_inputs`` in process, interleaved with
``json.loads`` of their lines (falling back loudly to a generated session without them).
``rss_above_floor_mib`` is the peak resident memory above the floor process's (interpreter and
file buffers): what the DAG costs; ``peak_rss_over_file`` is a case's whole peak resident
memory over the file's size (goal of issue 15: at most 2). With ``--traced`` each import case
also reports the peak Python heap under ``tracemalloc`` (slow: about 3x the import time).

Usage::

    python benchmarks/bench_import.py            # 40,000 realistic turns (about 3 minutes)
    python benchmarks/bench_import.py --quick    # 2,000 realistic turns (a few seconds)
    python benchmarks/bench_import.py --content small --turns 100000 --json out.json

Importable: ``run(turns, repeat=1, seed=0, traced=False, content="realistic")`` returns the
result dict and ``main(argv)`` is the command line (``benchmarks/run.py`` calls it with
``--quick`` and ``--json``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(HERE), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from _timing import (  # noqa: E402
    Clock,
    calibrate,
    input_source,
    interleave,
    ratio,
    real_inputs,
    rotation,
    spread,
)
from gen_transcript import CONTENT, generate  # noqa: E402

__all__ = [
    "CASES",
    "bench_cli_import_store",
    "bench_import",
    "bench_import_store",
    "bench_json_loads",
    "main",
    "run",
]


def bench_json_loads(path: Path, _work: Path) -> tuple[int, Any]:
    """The floor: ``json.loads`` of every line; returns the line count."""
    count = 0
    with open(path, "rb") as handle:
        for raw in handle:
            json.loads(raw)
            count += 1
    return count, None


def bench_import(path: Path, _work: Path) -> tuple[int, Any]:
    """Import the transcript into a Forest; returns the node count (and keeps the forest)."""
    from merkle_memory.dag import Forest
    from merkle_memory.transcripts import import_file

    forest = Forest()
    for node in import_file(path, "claude-code").nodes:
        forest.add(node)
    return len(forest), forest


def bench_import_store(path: Path, work: Path) -> tuple[int, Any]:
    """Import and store every node in a new SQLite file (one transaction); returns new nodes."""
    from merkle_memory.dag.store import open_store
    from merkle_memory.transcripts import import_file

    db = work / "nodes.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    result = import_file(path, "claude-code")
    with open_store(db) as store:
        return store.put_many(result.nodes), result


def bench_cli_import_store(path: Path, work: Path) -> tuple[int, Any]:
    """``dag import FILE --store DB --json`` in process; returns the node count."""
    from merkle_memory.cli import main as cli_main

    db = work / "cli.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["dag", "import", str(path), "--store", str(db), "--json"])
    if code != 0:
        raise RuntimeError(f"dag import exited {code}")
    return int(json.loads(out.getvalue())["nodes"]), None


CASES: dict[str, Callable[[Path, Path], tuple[int, Any]]] = {
    "json_loads": bench_json_loads,
    "import": bench_import,
    "import_store": bench_import_store,
    "cli_import_store": bench_cli_import_store,
}
"""Benchmark cases by name, in the order they run."""


def _rss_now_mib() -> float | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * resource.getpagesize() / 2**20, 1)


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)  # bytes on macOS


def _child(case: str, path: Path, repeat: int, traced: bool) -> dict[str, Any]:
    """Run one case in this (fresh) process and return its figures."""
    # Load the library first in every case (the floor included): neither the import time nor
    # the code's memory is part of any figure.
    import merkle_memory.cli
    import merkle_memory.dag._sqlite
    import merkle_memory.transcripts  # noqa: F401

    func = CASES[case]
    times: list[float] = []
    cpu: list[float] = []
    count = 0
    rss_end: float | None = None
    with tempfile.TemporaryDirectory() as work:
        for _ in range(repeat):
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            count, kept = func(path, Path(work))
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            rss_end = _rss_now_mib()  # the result is still alive here
            del kept
        figures: dict[str, Any] = {
            "seconds": round(min(times), 3),
            "cpu_seconds": round(min(cpu), 3),
            "count": count,
            "peak_rss_mib": _peak_rss_mib(),
            "rss_end_mib": rss_end,
        }
        if traced and case != "json_loads":
            import tracemalloc

            gc.collect()
            tracemalloc.start()
            func(path, Path(work))
            figures["traced_peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            tracemalloc.stop()
    return figures


def _spawn(case: str, path: Path, repeat: int, traced: bool) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", case, str(path)]
    argv += ["--repeat", str(repeat)] + (["--traced"] if traced else [])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"case {case} failed: {proc.stderr.strip()[-500:]}")
    figures: dict[str, Any] = json.loads(proc.stdout)
    return figures


def real_sessions(folder: Path | None = None) -> list[Path]:
    """The Claude Code session files (``*claude*.jsonl``) among the real inputs that import."""
    from merkle_memory.transcripts import import_file

    folder = real_inputs() if folder is None else folder
    found = []
    for path in sorted(folder.glob("*claude*.jsonl")) if folder.is_dir() else []:
        try:
            import_file(path, "claude-code")
        except Exception:  # not a Claude Code session this importer reads: not a sample
            continue
        found.append(path)
    return found


def bench_real(rounds: int, clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Import every real Claude Code session of ``../shared/real_inputs`` (in process), beside
    ``json.loads`` of their lines, interleaved in chunks of about 50 ms for ``rounds`` rounds.
    Falls back (loudly) to a generated 500-turn session when there is none."""
    from merkle_memory.dag import Forest
    from merkle_memory.transcripts import import_file

    with tempfile.TemporaryDirectory() as folder:
        paths = real_sessions()
        inputs = input_source(
            "import",
            bool(paths),
            f"{len(paths)} real Claude Code sessions: {', '.join(p.name for p in paths)}"
            if paths
            else "a 500-turn session generated by gen_transcript.py",
        )
        if not paths:
            paths = [Path(folder) / "session.jsonl"]
            with open(paths[0], "w", encoding="utf-8") as handle:
                generate(handle, 500, 0)
        lines = sum(len(p.read_bytes().splitlines()) for p in paths)

        def floor() -> None:
            for path in paths:
                bench_json_loads(path, Path(folder))

        def ours() -> None:
            for path in paths:
                forest = Forest()
                for node in import_file(path, "claude-code").nodes:
                    forest.add(node)

        chunk = calibrate(floor, 0.05, clock, most=100)
        measured = interleave(
            {"import": ours, "json_loads": floor}, chunk=chunk, rounds=rounds, clock=clock
        )
    return {
        "inputs": inputs,
        "files": len(paths),
        "lines": lines,
        "import_ms": spread([x * 1e3 for x in measured.samples["import"]]),
        "json_loads_ms": spread([x * 1e3 for x in measured.samples["json_loads"]]),
        "ratios": [
            ratio(
                "import_file+Forest",
                "json.loads of every line (real sessions)",
                measured.samples["import"],
                measured.samples["json_loads"],
            )
        ],
    }


def run(
    turns: int,
    repeat: int = 1,
    seed: int = 0,
    traced: bool = False,
    real_rounds: int = 11,
    content: str = "realistic",
) -> dict[str, Any]:
    """Generate a ``turns``-turn transcript (``content``: a ``gen_transcript`` profile) in a temp
    folder and measure every case.

    The cases alternate: each of ``repeat`` rounds runs every case once, each in a fresh
    process, in an order rotating from round to round (``_timing.rotation``); a case's ratio to
    the floor is taken per round and reported as median and spread. Then ``bench_real``.

    Returns:
        ``{"turns", "content", "lines", "file_mib", "python", "cases": {name: {"seconds",
        "cpu_seconds", "count", "turns_per_s", "peak_rss_mib", "rss_end_mib",
        "rss_above_floor_mib", "peak_rss_over_file"}}, "ratios",
        "real_sessions"}`` (``traced_peak_mib`` too with ``traced``; figures are medians).
    """
    print(
        f"import: the {turns:,}-turn session ({content} content) is synthetic by design "
        "(gen_transcript.py: a size beyond the real samples); the real sessions are measured "
        "after it",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            lines = generate(handle, turns, seed, content)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CASES}
        for order in rotation(list(CASES), repeat):
            for name in order:
                runs[name].append(_spawn(name, path, 1, traced))
                print(f"{name:>17}: {runs[name][-1]}", file=sys.stderr)
        floor = runs["json_loads"]
        file_mib = path.stat().st_size / 2**20
        cases: dict[str, Any] = {}
        ratios = []
        for name, figures_list in runs.items():
            seconds = [f["seconds"] for f in figures_list]
            cpu = [f["cpu_seconds"] for f in figures_list]
            figures = dict(figures_list[-1])
            figures["seconds"] = spread(seconds)
            figures["cpu_seconds"] = spread(cpu)
            figures["turns_per_s"] = round(turns / statistics.median(seconds))
            for key in ("peak_rss_mib", "rss_end_mib", "traced_peak_mib"):
                values = [f[key] for f in figures_list if f.get(key) is not None]
                if values:
                    figures[key] = statistics.median(values)
            if name != "json_loads":
                ratios.append(ratio(name, "json_loads", seconds, [f["seconds"] for f in floor]))
                cpu_floor = [f["cpu_seconds"] for f in floor]
                ratios.append(ratio(f"{name} (cpu)", "json_loads (cpu)", cpu, cpu_floor))
                figures["rss_above_floor_mib"] = round(
                    figures["peak_rss_mib"] - statistics.median(f["peak_rss_mib"] for f in floor),
                    1,
                )
                figures["peak_rss_over_file"] = round(figures["peak_rss_mib"] / file_mib, 2)
            cases[name] = figures
        return {
            "turns": turns,
            "content": content,
            "lines": lines,
            "file_mib": round(file_mib, 2),
            "python": platform.python_version(),
            "cases": cases,
            "ratios": ratios,
            "real_sessions": bench_real(real_rounds),
        }


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description="DAG import benchmark")
    parser.add_argument("--turns", type=int, default=40_000)
    parser.add_argument("--quick", action="store_true", help="2,000 turns")
    parser.add_argument(
        "--content", choices=CONTENT, default="realistic", help="gen_transcript content profile"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="rounds of every case (3; quick: 3)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--traced", action="store_true", help="also peak heap (tracemalloc)")
    parser.add_argument("--json", metavar="OUT", help="also write the result to this file")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        case, file = args.child
        print(json.dumps(_child(case, Path(file), args.repeat or 1, args.traced)))
        return 0
    rounds = args.repeat if args.repeat is not None else 3
    turns = 2_000 if args.quick else args.turns
    real_rounds = 11 if args.quick else 25
    result = run(turns, rounds, args.seed, args.traced, real_rounds, args.content)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
