"""Run every benchmark of merkle_memory in one go: one table of figures and ratios, and JSON.

Usage (from a checkout, with the ``bench`` extra installed for the peer libraries)::

    python benchmarks/run.py                  # full run (under 10 minutes on 2 cores)
    python benchmarks/run.py --quick          # smoke run (under 2 minutes)
    python benchmarks/run.py --json OUT.json  # also write every result as one JSON document
    python benchmarks/run.py --only canonical,scaling
    python benchmarks/run.py --json OUT.json --update-doc docs/PERFORMANCE.md
    python benchmarks/run.py --from-json OUT.json --markdown goals.md  # table only, no run

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

The issue-15 goal table (:func:`goal_table`: metric | measured median [min-max, n] | goal |
met?) is made from the one JSON document of a run: ``--markdown FILE`` writes it,
``--update-doc FILE`` puts it between the ``<!-- run.py:begin -->`` and ``<!-- run.py:end -->``
lines of ``FILE`` (docs/PERFORMANCE.md), stamped with the date, the machine (cores, CPU
architecture, system, Python) and the load average. ``--from-json IN`` makes the table from an
earlier run's ``--json`` document instead of running anything.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
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
    sys.modules[spec.name] = module  # dataclasses and pickling look their module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
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


# --- The issue-15 goal table, from one run's JSON document ----------------------------------

BEGIN_MARK = "<!-- run.py:begin -->"
END_MARK = "<!-- run.py:end -->"


@dataclass(frozen=True, slots=True)
class Goal:
    """One row of the goal table.

    Attributes:
        metric: what is measured (markdown).
        figure: the measured figure: ``{"median", "min"?, "max"?, "n"?}``, or ``None`` when the
            run did not measure it (its benchmark was not run or failed).
        unit: ``"x"`` (a ratio, library time / floor time), or a unit written after the value
            (``"ms"``, ``"entries/s"``, ``"us/leaf"``).
        goal: the goal as written in the table.
        met: ``True`` / ``False``, or ``None`` when the goal is not judged by one run.
    """

    metric: str
    figure: dict[str, Any] | None
    unit: str
    goal: str
    met: bool | None


def _result(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The result of benchmark ``name`` (a dict, or the one dict of a list, as ``bank`` and
    ``postgres`` write it), or ``None``."""
    for entry in document.get("benchmarks", []):
        result = entry.get("result")
        if isinstance(result, list) and len(result) == 1:
            result = result[0]
        if entry.get("name") == name and isinstance(result, dict):
            return result
    return None


def _paired(document: dict[str, Any], bench: str, where: str, name: str) -> dict[str, Any] | None:
    for r in document.get("ratios", []):
        if (r.get("benchmark"), r.get("where"), r.get("ratio")) == (bench, where, name):
            return dict(r)
    return None


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _judge(figure: dict[str, Any] | None, test: Callable[[float], bool]) -> bool:
    return figure is not None and test(float(figure["median"]))


def goals(document: dict[str, Any]) -> list[Goal]:
    """The rows of the acceptance table (issue 15, and issue 19's PostgreSQL rate), read from a
    ``run.py --json`` document.

    Ratios are library time / floor time (lower is better); a rate goal reads as its inverse
    (append >= 0.45x the raw rate is ``<= 2.22x`` the raw time). A figure the run did not
    measure is ``None`` and not met; prove-by-id is judged only at the 1,000,000 entries the goal
    names, and "tree append" has no number to meet (no regression against the previous note):
    both are shown and otherwise not judged.
    """
    rows: list[Goal] = []

    def ratio_row(metric: str, figure: dict[str, Any] | None, most: float, goal: str) -> None:
        rows.append(Goal(metric, figure, "x", goal, _judge(figure, lambda x: x <= most)))

    ratio_row(
        "`Ledger.append`, one durable entry per call / `write`+`fsync` of one line",
        _paired(document, "ledger", "append", "Ledger.append / write+fsync"),
        1 / 0.45,
        "<= 2.22x (rate >= 0.45x raw)",
    )
    ratio_row(
        "`Tenant.save` / `write`+`fsync` of one line",
        _paired(document, "ledger", "append", "Tenant.save / write+fsync"),
        1 / 0.25,
        "<= 4x (rate >= 0.25x raw)",
    )
    many = _dig(_result(document, "ledger"), "append", "group_commit_entries_per_s")
    rows.append(
        Goal(
            "`Ledger.append_many`, 1,000 entries per call",
            many,
            "entries/s",
            ">= 100,000 entries/s",
            _judge(many, lambda x: x >= 100_000),
        )
    )
    proofs = _dig(_result(document, "proofs"), "ledger_proofs")
    by_id = _dig(proofs, "prove_random_id_ms")
    size = _dig(proofs, "entries")
    rows.append(
        Goal(
            "prove a record by its id (random ids)"
            + (f", {size:,}-entry ledger" if isinstance(size, int) else ""),
            by_id,
            "ms",
            "< 1 ms at 1,000,000 entries",
            None if by_id is not None and size != 1_000_000 else _judge(by_id, lambda x: x < 1),
        )
    )
    imp = _result(document, "import")
    scope = ""
    if imp is not None and {"turns", "content", "file_mib"} <= imp.keys():
        scope = f", {imp['turns']:,} {imp['content']} turns ({imp['file_mib']:,} MiB)"
    ratio_row(
        "DAG import (`import_file` + `Forest`) / `json.loads` of every line" + scope,
        _paired(document, "import", "", "import / json_loads"),
        4.0,
        "<= 4x",
    )
    ratio_row(
        "the same, CPU time",
        _paired(document, "import", "", "import (cpu) / json_loads (cpu)"),
        4.0,
        "<= 4x",
    )
    ratio_row(
        "DAG import of the real sessions in `../shared/real_inputs` / `json.loads`",
        _paired(
            document,
            "import",
            "real_sessions",
            "import_file+Forest / json.loads of every line (real sessions)",
        ),
        4.0,
        "<= 4x",
    )
    over = _dig(imp, "cases", "import", "peak_rss_over_file")
    rss = None if over is None else {"median": over}
    rows.append(
        Goal(
            "DAG import, peak resident memory / file size",
            rss,
            "x",
            "<= 2x",
            _judge(rss, lambda x: x <= 2.0),
        )
    )
    corpora = [
        r["where"]
        for r in document.get("ratios", [])
        if r.get("benchmark") == "canonical" and r.get("ratio") == "loads / json.loads"
    ] or ["every corpus"]
    for corpus in corpora:
        ratio_row(
            f"`canonical.loads` / `json.loads`, {corpus}",
            _paired(document, "canonical", corpus, "loads / json.loads"),
            1.3,
            "<= 1.3x",
        )
    for corpus in corpora:
        ratio_row(
            f"`canonical.dumps` / C encoder (`json.dumps`, sorted keys), {corpus}",
            _paired(document, "canonical", corpus, "merkle_memory / floor"),
            1.1,
            "<= 1.1x",
        )
    for where, shape in (("verify", "this library's lines"), ("verify_anchor", "anchor lines")):
        n = _dig(_result(document, "ledger"), where, "entries")
        ratio_row(
            f"`verify_ledger` / `json.loads`+`sha256` per line, {shape}"
            + (f", {n:,} entries" if isinstance(n, int) else ""),
            _paired(document, "ledger", where, "verify_ledger / json.loads+sha256"),
            1.2,
            "<= 1.2x",
        )
    cases = _dig(_result(document, "postgres"), "cases")
    for case, shape in (
        ("postgres-one-tenant", "one tenant"),
        ("postgres-n-tenants", "a tenant each"),
    ):
        rate = next(
            (
                c.get("entries_per_second")
                for c in cases or []
                if isinstance(c, dict) and (c.get("case"), c.get("writers")) == (case, 16)
            ),
            None,
        )
        rows.append(
            Goal(
                f"durable `Ledger.append` on PostgreSQL, 16 writer processes, {shape} (issue 19)",
                rate,
                "entries/s",
                ">= 3,000 entries/s",
                _judge(rate, lambda x: x >= 3_000),
            )
        )
    tree = _dig(_result(document, "proofs"), "tree_append", "compact_range_us_per_leaf")
    rows.append(
        Goal(
            "tree append (`CompactRange`, leaf hashing included)",
            tree,
            "us/leaf",
            "no regression (compare with the previous note)",
            None,
        )
    )
    return rows


def _number(x: float, unit: str) -> str:
    if unit == "x":
        return f"{x:.3f}"
    if unit == "entries/s":
        return f"{x:,.0f}"
    return f"{x:.3g}"


def format_figure(figure: dict[str, Any] | None, unit: str) -> str:
    """``median [min-max, n=N]`` (units after the median), or ``not measured``."""
    if figure is None:
        return "not measured"
    text = _number(figure["median"], unit) + ("x" if unit == "x" else f" {unit}")
    if "min" in figure and "max" in figure:
        text += f" [{_number(figure['min'], unit)}-{_number(figure['max'], unit)}"
        text += f", n={figure['n']}]" if "n" in figure else "]"
    return text


def goal_table(document: dict[str, Any]) -> str:
    """The goal table of one run as markdown, between the run.py markers.

    Args:
        document: what ``run.py --json`` writes (``quick``, ``total_seconds``, ``python``,
            ``machine``, ``ratios``, ``benchmarks``; ``date``, ``cores``, ``system``,
            ``implementation``, ``load_average`` when the run recorded them).

    Returns:
        Markdown text that starts with ``BEGIN_MARK`` and ends with ``END_MARK`` and a newline.
    """
    kind = (
        "a quick run: smaller sizes than the goals name" if document.get("quick") else "a full run"
    )
    load = document.get("load_average")
    load_text = (
        f"; load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end"
        if isinstance(load, list) and len(load) == 2
        else ""
    )
    stamp = (
        f"Generated by one run of `python benchmarks/run.py` ({kind}, "
        f"{document.get('total_seconds', '?')} s) on {document.get('date', 'an unknown date')}; "
        f"machine: {document.get('cores', '?')} cores, {document.get('machine', '?')}, "
        f"{document.get('system', '?')}, {document.get('implementation', 'Python')} "
        f"{document.get('python', '?')}{load_text}."
    )
    lines = [
        BEGIN_MARK,
        stamp,
        "Ratios: library time / floor time, lower is better; median [min-max, n rounds].",
    ]
    fallbacks = document.get("synthetic_inputs") or []
    if fallbacks:
        names = ", ".join(sorted({str(f.get("benchmark", "?")) for f in fallbacks}))
        lines.append(f"**Synthetic inputs** (`../shared/real_inputs` not found): {names}.")
    lines += ["", "| metric | measured median [min-max, n] | goal | met? |", "|---|---|---|---|"]
    for row in goals(document):
        met = {True: "yes", False: "**no**", None: "not judged"}[row.met]
        lines.append(
            f"| {row.metric} | {format_figure(row.figure, row.unit)} | {row.goal} | {met} |"
        )
    lines.append(END_MARK)
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, table: str) -> str:
    """``text`` with everything from its ``BEGIN_MARK`` line to its ``END_MARK`` line replaced
    by ``table`` (which carries both markers).

    Raises:
        ValueError: ``text`` does not hold both markers, each once, begin before end.
    """
    if text.count(BEGIN_MARK) != 1 or text.count(END_MARK) != 1:
        raise ValueError(f"the document needs one {BEGIN_MARK} line and one {END_MARK} line")
    start, end = text.index(BEGIN_MARK), text.index(END_MARK)
    if end < start:
        raise ValueError(f"{END_MARK} comes before {BEGIN_MARK}")
    rest = text[end + len(END_MARK) :]
    return text[:start] + table + rest.removeprefix("\n")


def machine_stamp(now: datetime.datetime | None = None) -> dict[str, Any]:
    """Where and when a run happens: ``date`` (UTC, to the minute), ``cores``, ``system``,
    ``implementation``."""
    now = now or datetime.datetime.now(datetime.UTC)
    return {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()}",
        "implementation": platform.python_implementation(),
    }


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick``, ``--json OUT``, ``--only a,b``, ``--markdown OUT``,
    ``--update-doc DOC``, ``--from-json IN``; exit 1 if any benchmark failed, 2 on a usage
    error (such as a ``DOC`` without the markers, found before anything runs)."""
    parser = argparse.ArgumentParser(
        description="Run every merkle_memory benchmark.",
        epilog="examples: run.py --quick; run.py --json out.json --update-doc "
        "docs/PERFORMANCE.md; run.py --from-json out.json --markdown goals.md",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 2 minutes)")
    parser.add_argument("--json", metavar="OUT", help="write all results as one JSON document")
    parser.add_argument("--only", help="comma-separated names, e.g. canonical,scaling")
    parser.add_argument("--markdown", metavar="OUT", help="write the issue-15 goal table here")
    parser.add_argument(
        "--update-doc",
        metavar="DOC",
        help=f"put the goal table between the {BEGIN_MARK} and {END_MARK} lines of DOC",
    )
    parser.add_argument(
        "--from-json", metavar="IN", help="make the table from an earlier --json document"
    )
    args = parser.parse_args(argv)
    if args.update_doc:
        try:
            replace_between_markers(Path(args.update_doc).read_text(encoding="utf-8"), "")
        except (OSError, ValueError) as exc:
            print(f"error: --update-doc {args.update_doc}: {exc}", file=sys.stderr)
            return 2
    if args.from_json:
        try:
            document = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"error: --from-json {args.from_json}: {exc}", file=sys.stderr)
            return 2
        code = 0
    else:
        document, code = _run(args.quick, args.only)
        if args.json:
            Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    table = goal_table(document)
    if args.markdown:
        Path(args.markdown).write_text(table, encoding="utf-8")
    if args.update_doc:
        doc = Path(args.update_doc)
        doc.write_text(replace_between_markers(doc.read_text(encoding="utf-8"), table), "utf-8")
    if args.from_json and not (args.markdown or args.update_doc):
        print(table, end="")
    return code


def _run(quick: bool, only_text: str | None) -> tuple[dict[str, Any], int]:
    """Run the benchmarks, print the table, and return the JSON document and exit code."""
    only = [s.strip() for s in only_text.split(",")] if only_text else None
    stamp = machine_stamp()
    load_start = _load_average()
    began = time.perf_counter()
    entries = []
    for path in discover(only):
        print(f"== {path.name}", file=sys.stderr)
        entries.append(run_one(path, quick))
    total = round(time.perf_counter() - began, 2)
    print_table(entries)
    print(f"\ntotal: {total} s ({'quick' if quick else 'full'} run)")
    fallbacks = warn_fallbacks(entries)
    load_end = _load_average()
    document = {
        "quick": quick,
        "total_seconds": total,
        "python": platform.python_version(),
        "machine": platform.machine(),
        **stamp,
        "load_average": None if load_start is None or load_end is None else [load_start, load_end],
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
    return document, 1 if any("error" in e for e in entries) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
