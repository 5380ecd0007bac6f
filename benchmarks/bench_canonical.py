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

Before timing, it checks that our bytes equal rfc8785's on every value both accept. Every
implementation then encodes the same values, interleaved in short chunks in one process
(``_timing.interleave``); ratios are library time / baseline time (lower is better) with their
median and spread over the rounds. Without ``../shared/real_inputs`` the chat turns are
generated, and the run says so on stderr (``inputs.synthetic_fallback`` in the JSON). For use
from a combined runner: ``run(quick=...)`` returns ``{"inputs", "rows", "ratios"}`` and
``print_table(result)`` prints it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import string
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO))

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _timing import Clock, calibrate, input_source, interleave, ratio, real_inputs, spread  # noqa: E402

from merkle_memory import canonical  # noqa: E402
from merkle_memory.errors import CanonicalizationError  # noqa: E402

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


def real_chat_turns(folder: Path | None = None) -> list[Any]:
    """Message objects from the JSONL/JSON files in ``folder`` (default ``_timing.real_inputs()``;
    empty if it is absent)."""
    folder = real_inputs() if folder is None else folder
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


def corpora(turns: list[Any] | None = None) -> dict[str, list[Any]]:
    """The named corpora of this benchmark (real chat turns when ../shared is present)."""
    turns = real_chat_turns() if turns is None else turns
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


def _pass(encoder: Encoder, values: list[Any]) -> Callable[[], None]:
    def one_pass() -> None:
        for value in values:
            encoder(value)

    return one_pass


def run(quick: bool = False, clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Run the canonical JSON benchmark, implementations interleaved per corpus.

    Every implementation encodes the same values (those every installed encoder accepts); one
    call is one pass over the corpus, timed in chunks of about 10 ms alternating between the
    implementations (``_timing.interleave``) for 11 rounds (25 full).

    Returns:
        ``{"inputs": input_source(...), "rows": [...], "ratios": [...]}``: one row per
        (corpus, implementation) with ``suite``, ``corpus``, ``impl``, ``values``,
        ``us_per_value`` (median and spread, ``None`` when not installed); ratios are library
        time / baseline time (floor, ``json.loads`` for ``loads``, and each peer), per corpus.
    """
    rounds, target = (11, 0.004) if quick else (25, 0.01)
    impls: dict[str, Encoder | None] = {
        "floor": _floor,
        "merkle_memory": canonical.dumps,
        "merkle_memory_plain": canonical._dumps_reference,
        "rfc8785": _optional("rfc8785", "dumps"),
        "canonicaljson": _optional("canonicaljson", "encode_canonical_json"),
    }
    turns = real_chat_turns()
    inputs = input_source(
        "canonical",
        bool(turns),
        f"{len(turns)} message objects from real transcripts"
        if turns
        else "chat turns generated by generated_chat_turns()",
    )
    results: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    for corpus, values in corpora(turns).items():
        compared, skipped = check_against_rfc8785(values)
        accepted = _accepted(canonical.dumps, values)
        refused: list[str] = []
        for name, encoder in impls.items():  # the same values for every implementation
            if encoder is None:
                continue
            kept = _accepted(encoder, accepted)
            if kept:
                accepted = kept
            else:
                refused.append(name)
        lines = [canonical.dumps(v) for v in accepted]
        timed: dict[str, Callable[[], None]] = {
            name: _pass(encoder, accepted)
            for name, encoder in impls.items()
            if encoder is not None and name not in refused
        }
        timed["loads"] = _pass(canonical.loads, lines)
        timed["json.loads"] = _pass(json.loads, lines)
        chunk = {name: calibrate(func, target, clock, most=1000) for name, func in timed.items()}
        measured = interleave(timed, chunk=chunk, rounds=rounds, clock=clock)
        count = max(1, len(accepted))
        for name in [*impls, "loads", "json.loads"]:
            row: dict[str, Any] = {
                "suite": "canonical",
                "corpus": corpus,
                "impl": name,
                "values": len(accepted),
                "us_per_value": None,
            }
            if name in measured.samples:
                per_value = [s / count * 1e6 for s in measured.samples[name]]
                row["us_per_value"] = spread(per_value)
            elif name in refused:
                row["refused"] = True
            if name == "merkle_memory":
                row["rfc8785_compared"], row["rfc8785_skipped"] = compared, skipped
                row["values_dropped"] = len(values) - len(accepted)
            results.append(row)
        samples = measured.samples
        pairs = [(n, "floor") for n in impls if n != "floor"]
        pairs += [("merkle_memory", n) for n in ("rfc8785", "canonicaljson")]
        pairs += [("loads", "json.loads")]
        for lib, base in pairs:
            if lib in samples and base in samples:
                entry = ratio(lib, base, samples[lib], samples[base])
                ratios.append({"corpus": corpus, **entry})
    return {"inputs": inputs, "rows": results, "ratios": ratios}


def print_table(result: dict[str, Any], out: Any = None) -> None:
    """Print µs per value and the ratios (library time / baseline time, lower is better)."""
    out = out or sys.stdout
    header = f"{'corpus':<22} {'impl':<20} {'n':>5} {'median µs':>12} {'min-max µs':>20}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in result["rows"]:
        us = row["us_per_value"]
        if us is None:
            text, rng = ("refuses the corpus" if row.get("refused") else "not installed"), ""
        else:
            text, rng = f"{us['median']:.2f}", f"{us['min']:.2f}-{us['max']:.2f}"
        line = f"{row['corpus']:<22} {row['impl']:<20} {row['values']:>5} {text:>12} {rng:>20}"
        print(line, file=out)
    print("\nratios: library time / baseline time (lower is better)", file=out)
    for r in result["ratios"]:
        print(
            f"{r['corpus']:<22} {r['ratio']:<36} {r['median']:>7.3f}x "
            f"(min {r['min']:.3f} max {r['max']:.3f}, {r['n']} rounds)",
            file=out,
        )
    for row in result["rows"]:
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
