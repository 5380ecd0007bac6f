"""Benchmark: ``dag sync`` (issue 17 item 4), two goals measured in one run.

* ``unchanged_tree``: a sync of a tree of 10,000 transcript files that the store already holds
  (goal: under 2 s: every file is only stat'ed). The floor is ``os.walk`` + ``os.lstat`` of
  the same tree; both are interleaved, one call per chunk, and the ratio is sync / floor.
* ``incremental``: throughput of an incremental import against a one-shot import of the same
  new lines (goal: within 1.2x). A generated Claude Code session (``gen_transcript.py``, with
  assistant messages over several lines, tool results, rewinds) is cut in two halves. The
  incremental case syncs the second half appended to a file whose first half the store
  already holds (it hashes the old prefix, reads the held-back open tail again, looks up the
  keys the new lines name); the one-shot case syncs a new file of only the second half's lines
  into a store of the same size. Both start from a copy of the same store, prepared once; each
  round times one sync of each (rotating which goes first). The ratio is incremental /
  one-shot.

Usage::

    python benchmarks/bench_sync.py                 # 10,000 files, 20,000-turn session
    python benchmarks/bench_sync.py --quick         # 1,000 files, 4,000 turns
    python benchmarks/bench_sync.py --json out.json

Importable: ``run(files, turns, rounds)`` returns the result dict; ``main(argv)`` is the
command line (``benchmarks/run.py`` calls it with ``--quick`` and ``--json``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(HERE), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from _timing import input_source, interleave, ratio, spread  # noqa: E402
from gen_transcript import generate  # noqa: E402

from merkle_memory.dag import open_store  # noqa: E402
from merkle_memory.dag.store import SQLiteNodeStore  # noqa: E402
from merkle_memory.transcripts import sync_paths  # noqa: E402

__all__ = ["bench_incremental", "bench_unchanged_tree", "main", "run"]


def _store(path: Path) -> SQLiteNodeStore:
    store = open_store(path)
    assert isinstance(store, SQLiteNodeStore)
    return store


def _session(turns: int, seed: int) -> list[str]:
    buffer = io.StringIO()
    generate(buffer, turns, seed)
    return buffer.getvalue().splitlines(keepends=True)


def build_tree(root: Path, files: int) -> None:
    """``files`` small sessions (a few turns each) in 100 folders."""
    lines = _session(4, 1)
    text = "".join(lines)
    for index in range(files):
        folder = root / f"project-{index % 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"session-{index:05d}.jsonl").write_text(text)


def bench_unchanged_tree(files: int, rounds: int) -> dict[str, Any]:
    """Sync of an unchanged tree of ``files`` files, interleaved with walk + lstat."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        build_tree(root, files)
        db = Path(tmp) / "archive.db"
        began = time.perf_counter()
        with _store(db) as store:
            first = sync_paths([root], store)  # type: ignore[arg-type]
        setup = time.perf_counter() - began
        assert first.new_files == files, first
        reports = []

        def sync() -> None:
            with _store(db) as store:
                reports.append(sync_paths([root], store))  # type: ignore[arg-type]

        def walk() -> None:
            for folder, _dirs, names in os.walk(root):
                for name in names:
                    os.lstat(os.path.join(folder, name))

        timed = interleave({"sync": sync, "walk_lstat": walk}, chunk=1, rounds=rounds)
        assert all(r.new_nodes == 0 and r.updated_files == 0 for r in reports)
    seconds = timed.per_call("sync")
    return {
        "name": "unchanged_tree",
        "files": files,
        "first_sync_seconds": round(setup, 2),
        "seconds": seconds,
        "floor_seconds": timed.per_call("walk_lstat"),
        "goal_seconds": 2.0 * files / 10_000,
        "within_goal": seconds["median"] < 2.0 * files / 10_000,
        "ratios": [ratio("sync", "walk_lstat", timed.samples["sync"], timed.samples["walk_lstat"])],
    }


def bench_incremental(turns: int, rounds: int) -> dict[str, Any]:
    """Incremental sync of a session's second half against a one-shot sync of those lines."""
    lines = _session(turns, 7)
    half = len(lines) // 2
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        folder = base / "sessions"
        folder.mkdir()
        grown = folder / "session.jsonl"
        grown.write_text("".join(lines[:half]))
        fresh = folder / "new-lines.jsonl"
        prepared = base / "prepared.db"
        with _store(prepared) as store:
            sync_paths([grown], store)  # type: ignore[arg-type]
        counts: dict[str, int] = {}
        timings: dict[str, list[float]] = {"incremental": [], "one_shot": []}

        def case(name: str) -> Any:
            def once() -> None:
                db = base / f"{name}.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
                shutil.copyfile(prepared, db)
                if name == "incremental":
                    grown.write_text("".join(lines[:half]))  # the half the store holds
                target = grown if name == "incremental" else fresh
                with _store(db) as store:
                    if name == "incremental":
                        with grown.open("a") as handle:
                            handle.write("".join(lines[half:]))
                    else:
                        fresh.write_text("".join(lines[half:]))
                    began = time.perf_counter()
                    report = sync_paths([target], store)  # type: ignore[arg-type]
                    timings[name].append(time.perf_counter() - began)
                    counts[name] = report.new_nodes

            return once

        interleave(
            {"incremental": case("incremental"), "one_shot": case("one_shot")},
            chunk=1,
            rounds=rounds,
        )
    del timings["incremental"][0], timings["one_shot"][0]  # the warm-up calls
    return {
        "name": "incremental",
        "turns": turns,
        "lines": len(lines),
        "new_lines": len(lines) - half,
        "new_nodes": counts,
        "seconds": {name: spread(values) for name, values in timings.items()},
        "goal_ratio": 1.2,
        "ratios": [ratio("incremental", "one_shot", timings["incremental"], timings["one_shot"])],
    }


def run(files: int = 10_000, turns: int = 20_000, rounds: int = 5) -> dict[str, Any]:
    """Both benchmarks; the session is synthetic by design (sized beyond the samples)."""
    return {
        "inputs": input_source(
            "sync", True, "generated sessions (gen_transcript.py), synthetic by design"
        ),
        "unchanged_tree": bench_unchanged_tree(files, rounds),
        "incremental": bench_incremental(turns, rounds),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--files``, ``--turns``, ``--rounds``, ``--json OUT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1,000 files, 4,000 turns")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", metavar="OUT", default=None, help="write results as JSON")
    args = parser.parse_args(argv)
    files = args.files or (1_000 if args.quick else 10_000)
    turns = args.turns or (4_000 if args.quick else 20_000)
    rounds = args.rounds or (3 if args.quick else 5)
    result = run(files, turns, rounds)
    tree, inc = result["unchanged_tree"], result["incremental"]
    print(
        f"unchanged tree: {tree['files']} files synced in {tree['seconds']['median']} s "
        f"(goal {tree['goal_seconds']} s; walk+lstat {tree['floor_seconds']['median']} s; "
        f"first sync {tree['first_sync_seconds']} s)"
    )
    print(
        f"incremental: {inc['new_lines']} new lines in {inc['seconds']['incremental']['median']} s"
        f", one-shot {inc['seconds']['one_shot']['median']} s: "
        f"ratio {inc['ratios'][0]['median']} (goal <= {inc['goal_ratio']})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
