"""Benchmark: canonical.dumps beside the stdlib floor and peer RFC 8785 encoders.

Usage::

    python benchmarks/bench_canonical.py [--quick] [--json OUT]

For each corpus (real chat turns from ``../shared/real_inputs`` when present, else a generated
corpus; 384-float embeddings; deep configuration objects; large strings) it times, per value:

* ``floor``: ``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``;
* ``merkle_memory``: ``canonical.dumps`` (fast path) and ``merkle_memory_plain`` (the plain
  path, ``canonical._dumps_reference``);
* ``rfc8785``: ``rfc8785.dumps`` and ``canonicaljson``: ``canonicaljson.encode_canonical_json``
  (optional; reported as "not installed" when missing);
* ``loads`` beside ``json.loads`` on the canonical bytes (the ledger parses every line).

Before timing, it checks that our bytes equal rfc8785's on every value both accept. For use
from a combined runner: ``run(quick=...)`` returns a list of result dicts (one per corpus and
implementation) and ``print_table(results)`` prints them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import string
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO))

from merkle_memory import canonical  # noqa: E402
from merkle_memory.errors import CanonicalizationError  # noqa: E402

SHARED = Path(os.environ.get("MERKLE_MEMORY_SHARED", REPO.parent / "shared"))

Encoder = Callable[[Any], Any]


def _optional(module: str, attribute: str) -> Encoder | None:
    try:
        encoder: Encoder = getattr(importlib.import_module(module), attribute)
    except ImportError:
        return None
    return encoder


def _floor(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _messages(record: Any) -> Iterator[Any]:
    """Message-like objects in one parsed transcript line or request body."""
    if not isinstance(record, dict):
        return
    if isinstance(record.get("message"), dict):  # Claude Code line
        yield record["message"]
    elif isinstance(record.get("payload"), dict):  # Codex rollout line
        yield record["payload"]
    elif isinstance(record.get("messages"), list):  # Anthropic / OpenAI request body
        yield from (m for m in record["messages"] if isinstance(m, dict))
    else:
        yield record


def real_chat_turns(folder: Path = SHARED / "real_inputs") -> list[Any]:
    """Message objects from the JSONL/JSON files in ``folder`` (empty if it is absent)."""
    turns: list[Any] = []
    if not folder.is_dir():
        return turns
    for path in sorted(folder.iterdir()):
        try:
            if path.suffix == ".jsonl":
                records = [
                    json.loads(line) for line in path.read_text("utf-8").splitlines() if line
                ]
            elif path.suffix == ".json":
                records = [json.loads(path.read_text("utf-8"))]
            else:
                continue
        except (ValueError, UnicodeDecodeError):
            continue
        for record in records:
            turns.extend(_messages(record))
    return turns


def generated_chat_turns(count: int = 200, seed: int = 1) -> list[Any]:
    """A corpus shaped like Claude Code assistant/user messages, for runs without ../shared."""
    rng = random.Random(seed)
    words = ["the", "agent", "memory", "hash", "tool", "file", "résumé", "日本語", "ok", "😀"]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    turns: list[Any] = []
    for index in range(count):
        blocks: list[Any] = [{"type": "text", "text": text(rng.randint(5, 120))}]
        if index % 3 == 0:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{index:08d}",
                    "name": "Read",
                    "input": {"file_path": f"/src/{text(2)}.py", "limit": 200, "offset": 0},
                }
            )
        turns.append(
            {
                "id": f"msg_{index:012d}",
                "role": "assistant" if index % 2 else "user",
                "model": "claude-sonnet-4",
                "content": blocks,
                "stop_reason": "end_turn",
                "usage": {"input_tokens": rng.randint(1, 90_000), "output_tokens": 412},
            }
        )
    return turns


def embeddings(count: int = 50, dim: int = 384, seed: int = 2) -> list[Any]:
    """Lists of ``dim`` gaussian floats (sigma 0.05), like sentence-embedding vectors."""
    rng = random.Random(seed)
    return [[rng.gauss(0.0, 0.05) for _ in range(dim)] for _ in range(count)]


def deep_configs(count: int = 30, depth: int = 12, seed: int = 3) -> list[Any]:
    """Nested configuration objects: ``depth`` levels of small dicts with mixed scalars."""
    rng = random.Random(seed)

    def node(level: int) -> Any:
        item: dict[str, Any] = {
            "enabled": rng.random() < 0.5,
            "name": "".join(rng.choice(string.ascii_lowercase) for _ in range(8)),
            "retries": rng.randint(0, 10),
            "timeout": rng.choice([0.5, 1.0, 2.5, 30.0]),
            "tags": [rng.choice(["a", "b", "prod", "dev"]) for _ in range(3)],
        }
        if level < depth:
            item["child"] = node(level + 1)
            item["sibling"] = {"level": level, "note": None}
        return item

    return [node(1) for _ in range(count)]


def large_strings(count: int = 10, size: int = 100_000, seed: int = 4) -> list[Any]:
    """Objects holding one ~``size``-character string (mixed ASCII, escapes and non-ASCII)."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + ' \n\t"\\/éü日😀'
    return [{"body": "".join(rng.choices(alphabet, k=size)), "n": i} for i in range(count)]


def corpora() -> dict[str, list[Any]]:
    """The named corpora of this benchmark (real chat turns when ../shared is present)."""
    turns = real_chat_turns()
    return {
        "chat_turns" if turns else "chat_turns_generated": turns or generated_chat_turns(),
        "embedding_384": embeddings(),
        "deep_config": deep_configs(),
        "large_string": large_strings(),
    }


def check_against_rfc8785(values: list[Any]) -> tuple[int, int]:
    """Compare our bytes with rfc8785's on every value both accept.

    Returns:
        (values compared, values skipped because one side refused them).

    Raises:
        AssertionError: on the first value whose bytes differ.
    """
    peer = _optional("rfc8785", "dumps")
    if peer is None:
        return 0, len(values)
    compared = skipped = 0
    for value in values:
        try:
            ours = canonical.dumps(value)
        except CanonicalizationError:
            skipped += 1
            continue
        try:
            theirs = peer(value)
        except Exception:  # the peer refuses values we accept (e.g. 2**53 as a float)
            skipped += 1
            continue
        if ours != theirs:
            raise AssertionError(f"bytes differ from rfc8785 on {str(value)[:200]}")
        compared += 1
    return compared, skipped


def _accepted(encoder: Encoder, values: list[Any]) -> list[Any]:
    kept = []
    for value in values:
        try:
            encoder(value)
        except Exception:
            continue
        kept.append(value)
    return kept


def time_per_value(encoder: Encoder, values: list[Any], repeats: int, budget: float) -> float:
    """Median over ``repeats`` runs of the mean seconds per value (each run >= budget/repeats)."""
    start = time.perf_counter()
    for value in values:
        encoder(value)
    once = max(time.perf_counter() - start, 1e-9)
    loops = max(1, int(budget / repeats / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            for value in values:
                encoder(value)
        samples.append((time.perf_counter() - start) / (loops * len(values)))
    return statistics.median(samples)


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Run the canonical JSON benchmark.

    Returns:
        One dict per (corpus, implementation): ``suite``, ``corpus``, ``impl``, ``values``
        (count timed), ``median_us`` (microseconds per value, or ``None`` when not installed),
        ``vs_floor`` (ratio to the floor), ``ours_speedup`` (impl time / canonical.dumps time),
        ``rfc8785_compared``/``rfc8785_skipped`` (on the ``merkle_memory`` row).
    """
    repeats, budget = (5, 0.25) if quick else (9, 1.5)
    impls: dict[str, Encoder | None] = {
        "floor": _floor,
        "merkle_memory": canonical.dumps,
        "merkle_memory_plain": canonical._dumps_reference,
        "rfc8785": _optional("rfc8785", "dumps"),
        "canonicaljson": _optional("canonicaljson", "encode_canonical_json"),
    }
    results: list[dict[str, Any]] = []
    for corpus, values in corpora().items():
        compared, skipped = check_against_rfc8785(values)
        values = _accepted(canonical.dumps, values)
        timings: dict[str, float | None] = {}
        for name, encoder in impls.items():
            if encoder is None:
                timings[name] = None
                continue
            usable = _accepted(encoder, values)
            timings[name] = time_per_value(encoder, usable, repeats, budget) if usable else None
        lines = [canonical.dumps(v) for v in values]
        timings["loads"] = time_per_value(canonical.loads, lines, repeats, budget)
        timings["json.loads"] = time_per_value(json.loads, lines, repeats, budget)
        floor, ours = timings["floor"], timings["merkle_memory"]
        for name, seconds in timings.items():
            row: dict[str, Any] = {
                "suite": "canonical",
                "corpus": corpus,
                "impl": name,
                "values": len(values),
                "median_us": None if seconds is None else round(seconds * 1e6, 3),
                "vs_floor": None,
                "ours_speedup": None,
            }
            if seconds is not None and floor and ours and name not in ("loads", "json.loads"):
                row["vs_floor"] = round(seconds / floor, 3)
                row["ours_speedup"] = round(seconds / ours, 3)
            if name == "loads" and timings["json.loads"]:
                row["vs_floor"] = round(seconds / timings["json.loads"], 3)  # type: ignore[operator]
            if name == "merkle_memory":
                row["rfc8785_compared"], row["rfc8785_skipped"] = compared, skipped
            results.append(row)
    return results


def print_table(results: list[dict[str, Any]], out: Any = None) -> None:
    """Print results as a fixed-width table (``vs_floor`` of ``loads`` is vs json.loads)."""
    out = out or sys.stdout
    header = f"{'corpus':<22} {'impl':<20} {'n':>5} {'median µs':>12} {'vs floor':>9} {'x ours':>7}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in results:
        us = "not installed" if row["median_us"] is None else f"{row['median_us']:.2f}"
        ratio = "" if row["vs_floor"] is None else f"{row['vs_floor']:.2f}x"
        speed = "" if row["ours_speedup"] is None else f"{row['ours_speedup']:.2f}"
        line = f"{row['corpus']:<22} {row['impl']:<20} {row['values']:>5} {us:>12} {ratio:>9}"
        print(f"{line} {speed:>7}", file=out)
    for row in results:
        if row["impl"] == "merkle_memory":
            print(
                f"{row['corpus']}: bytes equal rfc8785 on {row['rfc8785_compared']} values "
                f"({row['rfc8785_skipped']} refused by one side or rfc8785 missing)",
                file=out,
            )


def main(argv: list[str] | None = None) -> int:
    """Command line: ``[--quick] [--json OUT]``; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = parser.parse_args(argv)
    results = run(quick=args.quick)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
