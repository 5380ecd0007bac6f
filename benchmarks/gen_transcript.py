"""Generate a synthetic Claude Code session transcript (JSONL) of N turns, deterministically.

A *turn* is one message line the API saw: a user prompt, an assistant reply (text and/or a
tool call) or a user line carrying a tool result. The mix imitates a real session: harness tags
(``<system-reminder>``) in prompts and tool output, assistant replies split over several lines
that share one ``message.id`` (one line per content block, as Claude Code writes them), noise
records that are not messages (``file-history-snapshot``, ``summary``), and now and then a
rewind: a user prompt whose ``parentUuid`` points back a few turns, so the DAG branches.

The output is streamed line by line, so generating 100,000 turns needs no memory beyond one
line. Same ``--seed`` and ``--turns``, same bytes.

Usage::

    python benchmarks/gen_transcript.py --turns 100000 --out /tmp/session.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["generate", "iter_lines", "main"]

SESSION = "5eed0000-0000-4000-8000-000000000000"
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "merkle",
    "ledger",
    "canonical",
    "digest",
    "proof",
    "node",
    "parent",
    "child",
    "branch",
    "root",
    "leaf",
    "import",
    "store",
    "verify",
    "seal",
    "chain",
    "tool",
    "result",
    "prompt",
    "reply",
    "session",
    "harness",
]
_TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _line(
    kind: str, uid: str, parent: str | None, turn: int, message: dict[str, Any]
) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/user/project",
        "sessionId": SESSION,
        "version": "2.0.0",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uid,
        "timestamp": f"2026-01-01T{turn // 3600 % 24:02d}:{turn // 60 % 60:02d}:"
        f"{turn % 60:02d}.000Z",
    }


def iter_lines(turns: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Yield the records of a synthetic transcript with exactly ``turns`` message turns.

    Args:
        turns: number of message turns (user prompts, assistant replies, tool results); each
            assistant reply may span up to three lines with one ``message.id``.
        seed: seed of the pseudo-random generator; equal seeds give equal transcripts.

    Yields:
        One JSON object per transcript line, in file order (noise records included).
    """
    rng = random.Random(seed)
    parent: str | None = None
    history: list[str | None] = []  # last lines of recent plain answers, for rewinds
    pending_tool: str | None = None
    next_role = "user"
    for turn in range(turns):
        if turn % 97 == 50:
            yield {"type": "file-history-snapshot", "messageId": _uuid(rng), "snapshot": {}}
        if next_role == "user":
            uid = _uuid(rng)
            if pending_tool is not None:
                output = _sentence(rng, rng.randint(5, 40))
                if rng.random() < 0.2:
                    output += "\n<system-reminder>\nfile looks fine\n</system-reminder>"
                content: Any = [
                    {"type": "tool_result", "tool_use_id": pending_tool, "content": output}
                ]
                pending_tool = None
            else:
                text = f"turn {turn}: " + _sentence(rng, rng.randint(3, 30))
                if rng.random() < 0.3:
                    text = "<system-reminder>\ntodo list is empty\n</system-reminder>\n" + text
                content = text
                if len(history) > 8 and rng.random() < 0.02:
                    parent = history[-rng.randint(2, 8)]  # a rewind: the DAG branches here
            yield _line("user", uid, parent, turn, {"role": "user", "content": content})
            parent = uid
            next_role = "assistant"
            continue
        message_id = f"msg_{rng.getrandbits(64):016x}"
        blocks: list[dict[str, Any]] = [
            {"type": "text", "text": _sentence(rng, rng.randint(5, 60))}
        ]
        if rng.random() < 0.5:
            pending_tool = f"toolu_{rng.getrandbits(64):016x}"
            blocks.append(
                {
                    "type": "tool_use",
                    "id": pending_tool,
                    "name": rng.choice(_TOOLS),
                    "input": {"command": _sentence(rng, 4), "timeout": rng.randint(0, 3)},
                }
            )
        for block in blocks:  # one line per content block, as Claude Code writes them
            uid = _uuid(rng)
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [block],
                "stop_reason": None,
                "usage": {"input_tokens": rng.randint(1, 9999), "output_tokens": 42},
            }
            yield _line("assistant", uid, parent, turn, message)
            parent = uid
        if pending_tool is None:
            history.append(parent)  # an answer without a tool call: a point to rewind to
        next_role = "user"
        if len(history) > 16:
            del history[:8]


def generate(out: IO[str], turns: int, seed: int = 0) -> int:
    """Write a synthetic transcript of ``turns`` turns to ``out``; return the lines written."""
    count = 0
    for record in iter_lines(turns, seed):
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--turns N`` (default 100000), ``--seed S``, ``--out FILE`` (or stdout)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="-", help="output file, '-' for stdout (default)")
    args = parser.parse_args(argv)
    if args.out == "-":
        lines = generate(sys.stdout, args.turns, args.seed)
    else:
        with open(args.out, "w", encoding="utf-8") as handle:
            lines = generate(handle, args.turns, args.seed)
    print(f"{lines} lines, {args.turns} turns", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
