"""Run every benchmark of merkle_memory in one go: one table of figures and ratios, and JSON.

Usage (from a checkout, with the ``bench`` extra installed for the peer libraries)::

    python benchmarks/run.py                  # full run (under 10 minutes on 2 cores)
    python benchmarks/run.py --quick          # smoke run (under 2 minutes)
    python benchmarks/run.py --json OUT.json  # also write every result as one JSON document
    python benchmarks/run.py --only canonical,scaling

Each ``benchmarks/bench_<area>.py`` present is imported and its ``main(argv)`` called with
``--quick`` (when asked) and ``--json <temp file>``; its own output goes to stderr, its JSON is
collected. stdout then gets one table: every numeric figure of every benchmark (flattened to
``item / metric``), ratios (metrics named ``vs_*``, ``*_ratio``, ``*speedup*``,
``*_over_*``, ``flatness``) marked with ``x``. A benchmark that fails is reported in the
table and in the JSON (``error``) and does not stop the others; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(HERE.parent))

_RATIO_HINTS = ("vs_", "_over_", "ratio", "speedup", "flatness")
_LABEL_KEYS = ("suite", "corpus", "impl", "case", "name", "operation")


def discover(only: list[str] | None = None) -> list[Path]:
    """The ``bench_*.py`` files beside this script, sorted by name (filtered by ``only``)."""
    found = sorted(HERE.glob("bench_*.py"))
    if only:
        found = [p for p in found if p.stem.removeprefix("bench_") in only]
    return found


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"_mm_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(path: Path, quick: bool) -> dict[str, Any]:
    """Import one benchmark file, run its ``main``, and return ``{name, seconds, result}``
    (or ``error`` instead of ``result``)."""
    name = path.stem.removeprefix("bench_")
    began = time.perf_counter()
    entry: dict[str, Any] = {"name": name}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        argv = (["--quick"] if quick else []) + ["--json", str(out)]
        try:
            module = _load(path)
            with contextlib.redirect_stdout(sys.stderr):
                code = module.main(argv)
            if code not in (0, None):
                raise RuntimeError(f"main returned exit code {code}")
            entry["result"] = json.loads(out.read_text(encoding="utf-8"))
        except (Exception, SystemExit) as exc:  # one failing benchmark must not stop the run
            traceback.print_exc(file=sys.stderr)
            entry["error"] = f"{type(exc).__name__}: {exc}"
    entry["seconds"] = round(time.perf_counter() - began, 2)
    return entry


def _label(row: dict[str, Any]) -> str:
    parts = [str(row[k]) for k in _LABEL_KEYS if isinstance(row.get(k), str)]
    return "/".join(parts)


def flatten(value: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every numeric leaf of a JSON result as ``(path, number)``; list items of dicts are
    named by their string fields (``corpus/impl``) or their ``n``."""
    out: list[tuple[str, float]] = []
    if isinstance(value, bool) or value is None:
        return out
    if isinstance(value, int | float):
        return [(prefix, value)]
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in _LABEL_KEYS and isinstance(sub, str):
                continue
            out.extend(flatten(sub, f"{prefix}/{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            tag = str(i)
            if isinstance(item, dict):
                tag = _label(item) or (f"n={item['n']}" if "n" in item else tag)
                if "n" in item and _label(item) == "":
                    item = {k: v for k, v in item.items() if k != "n"}
            out.extend(flatten(item, f"{prefix}/{tag}" if prefix else tag))
    return out


def is_ratio(path: str) -> bool:
    """Whether a metric path names a ratio (printed with an ``x``)."""
    leaf = path.rsplit("/", 1)[-1]
    return any(hint in leaf for hint in _RATIO_HINTS)


def print_table(entries: list[dict[str, Any]], out: Any = None) -> None:
    """One table: benchmark, metric path, value; ratios marked with ``x``."""
    out = out or sys.stdout
    rows: list[tuple[str, str, str]] = []
    for entry in entries:
        if "error" in entry:
            rows.append((entry["name"], "ERROR", entry["error"][:80]))
            continue
        for path, number in flatten(entry["result"]):
            text = f"{number:.3f}x" if is_ratio(path) else f"{number:,.3f}".rstrip("0").rstrip(".")
            rows.append((entry["name"], path, text))
        rows.append((entry["name"], "(wall seconds of this benchmark)", f"{entry['seconds']}"))
    width = max((len(r[1]) for r in rows), default=10)
    print(f"{'benchmark':<12} {'metric':<{width}} {'value':>14}", file=out)
    print("-" * (width + 28), file=out)
    for bench, path, text in rows:
        print(f"{bench:<12} {path:<{width}} {text:>14}", file=out)
    ratios = [r for r in rows if r[2].endswith("x")]
    if ratios:
        print(f"\nratios ({len(ratios)}):", file=out)
        for bench, path, text in ratios:
            print(f"  {bench:<12} {path:<{width}} {text:>14}", file=out)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--json OUT``, ``--only a,b``; exit 1 if any benchmark failed."""
    parser = argparse.ArgumentParser(description="Run every merkle_memory benchmark.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 2 minutes)")
    parser.add_argument("--json", metavar="OUT", help="write all results as one JSON document")
    parser.add_argument("--only", help="comma-separated names, e.g. canonical,scaling")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    began = time.perf_counter()
    entries = []
    for path in discover(only):
        print(f"== {path.name}", file=sys.stderr)
        entries.append(run_one(path, args.quick))
    total = round(time.perf_counter() - began, 2)
    print_table(entries)
    print(f"\ntotal: {total} s ({'quick' if args.quick else 'full'} run)")
    if args.json:
        document = {
            "quick": args.quick,
            "total_seconds": total,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "benchmarks": entries,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 1 if any("error" in e for e in entries) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
