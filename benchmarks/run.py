"""Run every benchmark of merkle_memory in one go: one table of figures and ratios, and JSON.

Usage (from a checkout, with the ``bench`` extra installed for the peer libraries)::

    python benchmarks/run.py                  # full run (under 10 minutes on 2 cores)
    python benchmarks/run.py --quick          # smoke run (under 2 minutes)
    python benchmarks/run.py --json OUT.json  # also write every result as one JSON document
    python benchmarks/run.py --only canonical,scaling

Each ``benchmarks/bench_<area>.py`` present is imported and its ``main(argv)`` called with
``--quick`` (when asked) and ``--json <temp file>``; its own output goes to stderr, its JSON is
collected. stdout then gets one table: every numeric figure of every benchmark (flattened to
``item / metric``; a median-and-spread summary shows its median), single ratios (``vs_*``,
``*_ratio``, ``*_over_*``, ``flatness``) marked with ``x``; then every paired ratio the
benchmarks measured with ``_timing`` (implementations interleaved in short chunks in this
process): library time / baseline time, lower is better, median, min-max and interquartile
range over the rounds. A benchmark that ran on synthetic data instead of
``../shared/real_inputs`` is named on stderr (``!!! SYNTHETIC DATA``) and flagged in the JSON
(``synthetic_fallback``). A benchmark that fails is reported in the table and in the JSON
(``error``) and does not stop the others; the exit code is then 1.
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

_RATIO_HINTS = ("vs_", "_over_", "ratio", "flatness")
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


def is_ratio_entry(value: Any) -> bool:
    """Whether ``value`` is a paired ratio from ``_timing.ratio`` (``ratio`` + ``median``)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("ratio"), str)
        and isinstance(value.get("median"), int | float)
    )


def is_spread(value: Any) -> bool:
    """Whether ``value`` is a ``_timing.spread`` summary (median, min, max, ...)."""
    return isinstance(value, dict) and {"median", "min", "max", "n"} <= value.keys()


def flatten(value: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every numeric leaf of a JSON result as ``(path, number)``; list items of dicts are
    named by their string fields (``corpus/impl``) or their ``n``. A spread summary counts as
    one figure, its median (``.../median``); paired ratios are left to :func:`collect_ratios`."""
    out: list[tuple[str, float]] = []
    if isinstance(value, bool) or value is None or is_ratio_entry(value):
        return out
    if isinstance(value, int | float):
        return [(prefix, value)]
    if is_spread(value):
        return [(f"{prefix}/median" if prefix else "median", value["median"])]
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


def collect_ratios(value: Any, prefix: str = "") -> list[dict[str, Any]]:
    """Every paired ratio in a result, as ``{"where": path, **ratio}`` (list indices and the
    ``ratios`` key are left out of ``where``; a ``corpus`` field is put in)."""
    out: list[dict[str, Any]] = []
    if is_ratio_entry(value):
        where = "/".join(x for x in (prefix, value.get("corpus", "")) if x)
        return [{"where": where, **value}]
    if isinstance(value, dict):
        for key, sub in value.items():
            inner = prefix if key == "ratios" else (f"{prefix}/{key}" if prefix else str(key))
            out.extend(collect_ratios(sub, inner))
    elif isinstance(value, list):
        for item in value:
            out.extend(collect_ratios(item, prefix))
    return out


def collect_fallbacks(value: Any) -> list[str]:
    """The ``detail`` of every ``_timing.input_source`` record that fell back to synthetic."""
    out: list[str] = []
    if isinstance(value, dict):
        if value.get("synthetic_fallback") is True:
            out.append(str(value.get("detail", "synthetic input")))
        for sub in value.values():
            out.extend(collect_fallbacks(sub))
    elif isinstance(value, list):
        for item in value:
            out.extend(collect_fallbacks(item))
    return out


def is_ratio(path: str) -> bool:
    """Whether a metric path names a single-number ratio (printed with an ``x``), e.g. the
    scaling ``flatness``; all are slower / faster, so lower is better."""
    leaf = path.rsplit("/", 1)[-1]
    return any(hint in leaf for hint in _RATIO_HINTS)


def print_table(entries: list[dict[str, Any]], out: Any = None) -> None:
    """One table of figures (benchmark, metric path, value; single ratios marked ``x``), then
    every paired ratio: library time / baseline time, median and spread over the rounds."""
    out = out or sys.stdout
    rows: list[tuple[str, str, str]] = []
    ratios: list[tuple[str, dict[str, Any]]] = []
    for entry in entries:
        if "error" in entry:
            rows.append((entry["name"], "ERROR", entry["error"][:80]))
            continue
        for path, number in flatten(entry["result"]):
            text = f"{number:.3f}x" if is_ratio(path) else f"{number:,.3f}".rstrip("0").rstrip(".")
            rows.append((entry["name"], path, text))
        rows.append((entry["name"], "(wall seconds of this benchmark)", f"{entry['seconds']}"))
        ratios.extend((entry["name"], r) for r in collect_ratios(entry["result"]))
    width = max((len(r[1]) for r in rows), default=10)
    print(f"{'benchmark':<12} {'metric':<{width}} {'value':>14}", file=out)
    print("-" * (width + 28), file=out)
    for bench, path, text in rows:
        print(f"{bench:<12} {path:<{width}} {text:>14}", file=out)
    if ratios:
        print(
            f"\nratios ({len(ratios)}): library time / baseline time, lower is better "
            "(median over paired rounds; min-max; interquartile range; rounds)",
            file=out,
        )
        names = [f"{r['where']}: {r['ratio']}" if r["where"] else r["ratio"] for _, r in ratios]
        wide = max(len(n) for n in names)
        for (bench, r), name in zip(ratios, names, strict=True):
            print(
                f"  {bench:<10} {name:<{wide}} {r['median']:>8.3f}x"
                f"  {r['min']:.3f}-{r['max']:.3f}  IQR {r['q1']:.3f}-{r['q3']:.3f}  n={r['n']}",
                file=out,
            )


def warn_fallbacks(entries: list[dict[str, Any]], err: Any = None) -> list[dict[str, str]]:
    """Say on stderr, loudly, which benchmarks ran on synthetic data instead of real inputs."""
    found = [
        {"benchmark": e["name"], "detail": d}
        for e in entries
        if "result" in e
        for d in collect_fallbacks(e["result"])
    ]
    for item in found:
        print(
            f"!!! SYNTHETIC DATA: {item['benchmark']} ran on {item['detail']} "
            "(../shared/real_inputs not found)",
            file=err or sys.stderr,
        )
    return found


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
    fallbacks = warn_fallbacks(entries)
    if args.json:
        document = {
            "quick": args.quick,
            "total_seconds": total,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "ratio_direction": "library time / baseline time (lower is better)",
            "synthetic_fallback": bool(fallbacks),
            "synthetic_inputs": fallbacks,
            "ratios": [
                {"benchmark": e["name"], **r}
                for e in entries
                if "result" in e
                for r in collect_ratios(e["result"])
            ],
            "benchmarks": entries,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 1 if any("error" in e for e in entries) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
