"""benchmarks/run.py and benchmarks/_timing.py: discovery, flattening into one table, ratio
direction, chunk interleaving order, the synthetic-input flag, and failure isolation (fake
clocks only: no timing assertions)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


runner = _load(RUN, "_bench_runner")
timing = _load(RUN.parent / "_timing.py", "_bench_timing")


class FakeClock:
    """A clock that advances by the given step on each call (cycling)."""

    def __init__(self, steps: list[float]) -> None:
        self.steps, self.now, self.calls = steps, 0.0, 0

    def __call__(self) -> float:
        self.now += self.steps[self.calls % len(self.steps)]
        self.calls += 1
        return self.now


GOOD = """
import json, sys
from pathlib import Path
def main(argv):
    quick = "--quick" in argv
    out = argv[argv.index("--json") + 1]
    print("noise on stdout")
    rows = [{"corpus": "c", "impl": "ours", "median_us": 2.0, "vs_floor": 1.25, "ok": True}]
    ratios = [{"ratio": "ours / floor", "median": 1.5, "min": 1.0, "max": 2.0, "q1": 1.2,
               "q3": 1.8, "n": 3}]
    doc = {"quick": quick, "rows": rows, "points": [{"n": 10, "seconds": 0.5}],
           "ratios": ratios}
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
    """vs_*, *ratio*, *_over_* and flatness are ratios; times, counts and the removed mixed
    direction ``ours_speedup`` are not."""
    assert runner.is_ratio("a/b/vs_floor") and runner.is_ratio("ops/x/flatness")
    assert runner.is_ratio("a/size_ratio") and runner.is_ratio("a/time_over_floor")
    assert not runner.is_ratio("a/ours_speedup")
    assert not runner.is_ratio("a/vs/median_us") and not runner.is_ratio("a/seconds")


def test_flatten_shows_a_spread_as_its_median_and_leaves_ratios_out() -> None:
    """A spread summary is one figure (its median); paired ratios go to their own table."""
    doc = {
        "us": {"median": 2.0, "min": 1.0, "max": 3.0, "q1": 1.5, "q3": 2.5, "n": 5},
        "ratios": [timing.ratio("lib", "floor", [2.0, 4.0], [1.0, 1.0])],
    }
    assert runner.flatten(doc) == [("us/median", 2.0)]


def test_interleave_alternates_chunks_and_rotates_the_start() -> None:
    """Every round runs one chunk of each implementation; round r starts at the r-th name;
    warm-up calls are not timed; a sample is seconds per call of its chunk."""
    calls: list[str] = []
    impls = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    clock = FakeClock([1.0])  # every reading is 1 s after the previous: each chunk takes 1 s
    result = timing.interleave(impls, chunk=2, rounds=4, warmup=1, clock=clock)
    assert result.order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert calls[:3] == ["a", "b", "c"]  # the warm-up
    assert calls[3:9] == ["a", "a", "b", "b", "c", "c"]  # chunks of two calls
    assert len(calls) == 3 + 4 * 3 * 2
    assert result.samples == {name: [0.5] * 4 for name in "abc"}  # 1 s / 2 calls
    assert clock.calls == 2 * 12  # two readings per chunk, none for the warm-up
    assert timing.rotation(["x", "y"], 3) == [["x", "y"], ["y", "x"], ["x", "y"]]


def test_interleave_per_name_chunk_sizes() -> None:
    """``chunk`` may give a call count per implementation."""
    calls: list[str] = []
    impls = {name: (lambda name=name: calls.append(name)) for name in ("fast", "slow")}
    result = timing.interleave(
        impls, chunk={"fast": 4, "slow": 1}, rounds=1, warmup=0, clock=FakeClock([2.0])
    )
    assert calls == ["fast"] * 4 + ["slow"]
    assert result.samples == {"fast": [0.5], "slow": [2.0]}


def test_ratio_is_library_over_baseline_paired_by_round() -> None:
    """ratio() divides the library's sample of each round by the baseline's of the same round
    (lower is better) and reports median, min, max and quartiles."""
    lib, base = [2.0, 3.0, 8.0, 1.0, 5.0], [1.0, 1.0, 2.0, 1.0, 1.0]
    r = timing.ratio("ours", "floor", lib, base)
    assert r == {
        "ratio": "ours / floor",
        "library": "ours",
        "baseline": "floor",
        "median": 3.0,  # per round: 2, 3, 4, 1, 5
        "min": 1.0,
        "max": 5.0,
        "q1": 2.0,
        "q3": 4.0,
        "n": 5,
    }
    faster = timing.ratio("ours", "peer", [1.0, 1.0], [4.0, 2.0])
    assert faster["median"] == 0.375 and faster["min"] == 0.25 and faster["max"] == 0.5
    with pytest.raises(ValueError):
        timing.ratio("a", "b", [1.0], [1.0, 2.0])


def test_collect_ratios_names_where_they_were_measured() -> None:
    """Paired ratios are found anywhere in a result; the ``ratios`` key and list indices are
    not part of their place, a corpus is."""
    r = timing.ratio("lib", "floor", [3.0], [2.0])
    doc = {"append": {"ratios": [r]}, "ratios": [{"corpus": "chat", **r}]}
    found = runner.collect_ratios(doc)
    assert [(x["where"], x["ratio"], x["median"]) for x in found] == [
        ("append", "lib / floor", 1.5),
        ("chat", "lib / floor", 1.5),
    ]


def test_input_source_flags_and_announces_synthetic_fallback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A fallback to synthetic data is flagged in the result and said on stderr; the runner
    repeats it loudly and lists it for the JSON."""
    real = timing.input_source("canonical", True, "12 real turns")
    assert real == {"source": "real", "synthetic_fallback": False, "detail": "12 real turns"}
    assert capsys.readouterr().err == ""
    fake = timing.input_source("canonical", False, "generated turns")
    assert fake["source"] == "synthetic" and fake["synthetic_fallback"] is True
    assert "SYNTHETIC INPUT" in capsys.readouterr().err
    entries = [
        {"name": "canonical", "result": {"inputs": fake, "rows": []}, "seconds": 1.0},
        {"name": "ledger", "result": {"inputs": real}, "seconds": 1.0},
        {"name": "bad", "error": "RuntimeError: boom", "seconds": 0.0},
    ]
    found = runner.warn_fallbacks(entries)
    assert found == [{"benchmark": "canonical", "detail": "generated turns"}]
    err = capsys.readouterr().err
    assert "!!! SYNTHETIC DATA: canonical ran on generated turns" in err and "ledger" not in err


def test_real_inputs_follow_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$MERKLE_MEMORY_SHARED`` moves the real inputs folder (how a fallback is forced)."""
    monkeypatch.setenv("MERKLE_MEMORY_SHARED", str(tmp_path))
    assert timing.real_inputs() == tmp_path / "real_inputs"


def test_spread_of_one_sample_and_repeat_with_a_fake_clock() -> None:
    """spread() of one value is that value everywhere; repeat() returns each call's time."""
    assert timing.spread([2.5]) == {
        "median": 2.5,
        "min": 2.5,
        "max": 2.5,
        "q1": 2.5,
        "q3": 2.5,
        "n": 1,
    }
    assert timing.repeat(lambda: None, 3, clock=FakeClock([1.0, 2.0])) == [2.0, 2.0, 2.0]
    assert timing.calibrate(lambda: None, 0.5, clock=FakeClock([0.01])) == 50


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
    assert "library time / baseline time, lower is better" in table
    assert "ours / floor" in table and "1.500x" in table and "1.000-2.000" in table


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


def test_realistic_transcript_profile() -> None:
    """gen_transcript's realistic profile: same seed, same bytes; real-session shapes (thinking
    with a signature, Edit inputs, tool results copied into ``toolUseResult``, lines of one
    ``message.id``); an unknown profile is refused; the small profile is unchanged by it."""
    gen = _load(RUN.parent / "gen_transcript.py", "_bench_gen_transcript")
    first = [json.dumps(r) for r in gen.iter_lines(60, seed=3, content="realistic")]
    assert first == [json.dumps(r) for r in gen.iter_lines(60, seed=3, content="realistic")]
    records = [json.loads(line) for line in first]
    blocks = [b for r in records if r.get("type") == "assistant" for b in r["message"]["content"]]
    assert {b["type"] for b in blocks} >= {"thinking", "text", "tool_use"}
    assert all(b["signature"] for b in blocks if b["type"] == "thinking")
    results = [r for r in records if "toolUseResult" in r]
    assert results and all(r["message"]["content"][0]["type"] == "tool_result" for r in results)
    ids = [r["message"]["id"] for r in records if r.get("type") == "assistant"]
    assert len(ids) > len(set(ids))  # replies spread over several lines
    assert sum(len(line) for line in first) / len(first) > 1500  # real sizes, not one-liners
    small = [json.dumps(r) for r in gen.iter_lines(60, seed=3)]
    assert small == [json.dumps(r) for r in gen.iter_lines(60, seed=3, content="small")]
    with pytest.raises(ValueError, match="unknown content profile"):
        gen.iter_lines(1, content="huge")


FAKE_RUN: dict[str, Any] = {
    "quick": False,
    "total_seconds": 351.5,
    "python": "3.11.7",
    "machine": "x86_64",
    "date": "2026-12-02 04:00 UTC",
    "cores": 2,
    "system": "Linux 6.1",
    "implementation": "CPython",
    "load_average": [0.25, 1.5],
    "synthetic_inputs": [],
    "ratios": [
        {"benchmark": "ledger", "where": "append", "ratio": "Ledger.append / write+fsync",
         "median": 2.0, "min": 1.5, "max": 3.25, "n": 30},
        {"benchmark": "ledger", "where": "append", "ratio": "Tenant.save / write+fsync",
         "median": 4.5, "min": 4.0, "max": 5.0, "n": 30},
        {"benchmark": "import", "where": "", "ratio": "import / json_loads",
         "median": 3.5, "min": 3.25, "max": 4.25, "n": 3},
        {"benchmark": "import", "where": "", "ratio": "import (cpu) / json_loads (cpu)",
         "median": 4.0, "min": 3.5, "max": 4.5, "n": 3},
        {"benchmark": "canonical", "where": "chat_turns", "ratio": "loads / json.loads",
         "median": 1.25, "min": 1.125, "max": 1.5, "n": 11},
        {"benchmark": "canonical", "where": "chat_turns", "ratio": "merkle_memory / floor",
         "median": 1.005, "min": 0.875, "max": 1.25, "n": 11},
        {"benchmark": "canonical", "where": "large_string", "ratio": "loads / json.loads",
         "median": 1.3125, "min": 1.25, "max": 1.375, "n": 11},
        {"benchmark": "canonical", "where": "large_string", "ratio": "merkle_memory / floor",
         "median": 0.95, "min": 0.9, "max": 1.0, "n": 11},
        {"benchmark": "ledger", "where": "verify", "ratio": "verify_ledger / json.loads+sha256",
         "median": 1.125, "min": 1.0, "max": 1.25, "n": 5},
    ],
    "benchmarks": [
        {"name": "ledger", "seconds": 60.0, "result": {
            "append": {"group_commit_entries_per_s":
                       {"median": 123456.0, "min": 99000.0, "max": 150000.0, "n": 30}},
            "verify": {"entries": 1000000}, "verify_anchor": {"entries": 1000000}}},
        {"name": "import", "seconds": 90.0, "result": {
            "turns": 40000, "content": "realistic", "file_mib": 115.75,
            "cases": {"import": {"peak_rss_over_file": 1.79}}}},
        {"name": "proofs", "seconds": 80.0, "result": {
            "tree_append": {"compact_range_us_per_leaf":
                            {"median": 2.5, "min": 2.25, "max": 3.0, "n": 1000}},
            "ledger_proofs": {"entries": 1000000, "prove_random_id_ms":
                              {"median": 0.5, "min": 0.25, "max": 1.5, "n": 25}}}},
        {"name": "canonical", "seconds": 40.0, "error": "RuntimeError: boom"},
        {"name": "postgres", "seconds": 200.0, "result": [{"cases": [
            {"case": "postgres-one-tenant", "writers": 4, "entries_per_second":
             {"median": 2500.0, "min": 2400.0, "max": 2600.0, "n": 3}},
            {"case": "postgres-one-tenant", "writers": 16, "entries_per_second":
             {"median": 3474.0, "min": 3239.0, "max": 3520.0, "n": 3}},
            {"case": "postgres-n-tenants", "writers": 16, "entries_per_second":
             {"median": 2999.5, "min": 2800.0, "max": 3100.0, "n": 3}}]}]},
    ],
}  # fmt: skip

FAKE_TABLE = """<!-- run.py:begin -->
Generated by one run of `python benchmarks/run.py` (a full run, 351.5 s) on 2026-12-02 04:00 UTC; \
machine: 2 cores, x86_64, Linux 6.1, CPython 3.11.7; load average (1 min) 0.25 at the start, \
1.50 at the end.
Ratios: library time / floor time, lower is better; median [min-max, n rounds].

| metric | measured median [min-max, n] | goal | met? |
|---|---|---|---|
| `Ledger.append`, one durable entry per call / `write`+`fsync` of one line | \
2.000x [1.500-3.250, n=30] | <= 2.22x (rate >= 0.45x raw) | yes |
| `Tenant.save` / `write`+`fsync` of one line | 4.500x [4.000-5.000, n=30] | \
<= 4x (rate >= 0.25x raw) | **no** |
| `Ledger.append_many`, 1,000 entries per call | 123,456 entries/s [99,000-150,000, n=30] | \
>= 100,000 entries/s | yes |
| prove a record by its id (random ids), 1,000,000-entry ledger | 0.5 ms [0.25-1.5, n=25] | \
< 1 ms at 1,000,000 entries | yes |
| DAG import (`import_file` + `Forest`) / `json.loads` of every line, 40,000 realistic turns \
(115.75 MiB) | 3.500x [3.250-4.250, n=3] | <= 4x | yes |
| the same, CPU time | 4.000x [3.500-4.500, n=3] | <= 4x | yes |
| DAG import of the real sessions in `../shared/real_inputs` / `json.loads` | not measured | \
<= 4x | **no** |
| DAG import, peak resident memory / file size | 1.790x | <= 2x | yes |
| `canonical.loads` / `json.loads`, chat_turns | 1.250x [1.125-1.500, n=11] | <= 1.3x | yes |
| `canonical.loads` / `json.loads`, large_string | 1.312x [1.250-1.375, n=11] | <= 1.3x | \
**no** |
| `canonical.dumps` / C encoder (`json.dumps`, sorted keys), chat_turns | \
1.005x [0.875-1.250, n=11] | <= 1.1x | yes |
| `canonical.dumps` / C encoder (`json.dumps`, sorted keys), large_string | \
0.950x [0.900-1.000, n=11] | <= 1.1x | yes |
| `verify_ledger` / `json.loads`+`sha256` per line, this library's lines, 1,000,000 entries | \
1.125x [1.000-1.250, n=5] | <= 1.2x | yes |
| `verify_ledger` / `json.loads`+`sha256` per line, anchor lines, 1,000,000 entries | \
not measured | <= 1.2x | **no** |
| durable `Ledger.append` on PostgreSQL, 16 writer processes, one tenant (issue 19) | \
3,474 entries/s [3,239-3,520, n=3] | >= 3,000 entries/s | yes |
| durable `Ledger.append` on PostgreSQL, 16 writer processes, a tenant each (issue 19) | \
3,000 entries/s [2,800-3,100, n=3] | >= 3,000 entries/s | **no** |
| tree append (`CompactRange`, leaf hashing included) | 2.5 us/leaf [2.25-3, n=1000] | \
no regression (compare with the previous note) | not judged |
<!-- run.py:end -->
"""


def test_goal_table_maps_a_fake_run_to_the_exact_markdown() -> None:
    """The issue-15 goal table of a small fake ``--json`` document: stamp (date, cores,
    machine, system, Python, load), one row per goal with median [min-max, n], goals read in
    the library-time / floor-time direction (2.0x meets "rate >= 0.45x"), a median exactly at
    a limit judged by its unrounded value (1.3125 > 1.3; 2,999.5 entries/s < 3,000, though
    shown rounded), figures the run lacks "not measured" and not met, canonical rows per
    corpus the run measured, the PostgreSQL rows read from the 16-writer cases (a result
    written as a one-element list, as bench_postgres.py writes it)."""
    assert runner.goal_table(FAKE_RUN) == FAKE_TABLE


def test_goal_table_flags_synthetic_inputs_and_quick_runs() -> None:
    """A quick run says so in the stamp; synthetic inputs are named in bold above the table;
    prove-by-id at another size than 1,000,000 entries is shown but not judged; a run without
    the canonical benchmark has one unmet row per canonical goal."""
    doc = dict(FAKE_RUN, quick=True, synthetic_inputs=[{"benchmark": "import", "detail": "x"}])
    doc["ratios"] = []
    doc["benchmarks"] = [
        {"name": "proofs", "result": {"ledger_proofs": {"entries": 20000, "prove_random_id_ms":
                                      {"median": 0.5, "min": 0.25, "max": 1.5, "n": 25}}}},
    ]  # fmt: skip
    lines = runner.goal_table(doc).splitlines()
    assert lines[1].startswith(
        "Generated by one run of `python benchmarks/run.py` (a quick run: smaller sizes than "
        "the goals name, 351.5 s)"
    )
    assert lines[3] == "**Synthetic inputs** (`../shared/real_inputs` not found): import."
    assert (
        "| prove a record by its id (random ids), 20,000-entry ledger | 0.5 ms [0.25-1.5, n=25] "
        "| < 1 ms at 1,000,000 entries | not judged |" in lines
    )
    canonical_rows = [line for line in lines if line.startswith("| `canonical.")]
    assert canonical_rows == [
        "| `canonical.loads` / `json.loads`, every corpus | not measured | <= 1.3x | **no** |",
        "| `canonical.dumps` / C encoder (`json.dumps`, sorted keys), every corpus | not measured "
        "| <= 1.1x | **no** |",
    ]


def test_update_doc_replaces_only_the_marked_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from-json IN --update-doc DOC`` replaces the lines from the begin marker to the end
    marker (both kept) and nothing else; ``--markdown`` writes the same table; a document
    without both markers is refused with exit code 2 and left as it was."""
    source = tmp_path / "run.json"
    source.write_text(json.dumps(FAKE_RUN))
    doc = tmp_path / "PERFORMANCE.md"
    doc.write_text("# Notes\n\nbefore\n<!-- run.py:begin -->\nold\n<!-- run.py:end -->\nafter\n")
    out = tmp_path / "goals.md"
    code = runner.main(
        ["--from-json", str(source), "--update-doc", str(doc), "--markdown", str(out)]
    )
    assert code == 0
    assert doc.read_text() == "# Notes\n\nbefore\n" + FAKE_TABLE + "after\n"
    assert out.read_text() == FAKE_TABLE
    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n")
    assert runner.main(["--from-json", str(source), "--update-doc", str(bare)]) == 2
    assert bare.read_text() == "# no markers\n"
    assert "error: --update-doc" in capsys.readouterr().err
    with pytest.raises(ValueError, match="comes before"):
        runner.replace_between_markers(f"{runner.END_MARK}\n{runner.BEGIN_MARK}\n", "")
    assert runner.main(["--from-json", str(source)]) == 0
    assert capsys.readouterr().out == FAKE_TABLE
