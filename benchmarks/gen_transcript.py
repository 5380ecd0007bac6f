"""Generate a synthetic Claude Code session transcript (JSONL) of N turns, deterministically.

A *turn* is one message line the API saw: a user prompt, an assistant reply (text and/or a
tool call) or a user line carrying a tool result. The mix imitates a real session: harness tags
(``<system-reminder>``) in prompts and tool output, assistant replies split over several lines
that share one ``message.id`` (one line per content block, as Claude Code writes them), noise
records that are not messages (``file-history-snapshot``, ``summary``), and now and then a
rewind: a user prompt whose ``parentUuid`` points back a few turns, so the DAG branches.

Two content profiles (``--content``):

* ``small`` (the default of :func:`iter_lines`): short sentences, about 750 bytes a line, where
  the fixed cost of a node dominates;
* ``realistic``: the sizes of real Claude Code sessions (about 2.9 KB a line, 110 MiB for
  40,000 turns): thinking blocks with their signatures, Edit/Write/Bash/Read/TodoWrite tool
  calls, tool results of 0.3-6 KB of code-like text copied again into ``toolUseResult`` (as
  Claude Code writes them), some results as lists of text parts, long ``usage`` objects,
  ``requestId``, and a little non-ASCII text.

The output is streamed line by line, so generating 100,000 turns needs no memory beyond one
line. Same ``--seed``, ``--turns`` and ``--content``, same bytes.

Usage::

    python benchmarks/gen_transcript.py --turns 100000 --out /tmp/session.jsonl
    python benchmarks/gen_transcript.py --turns 40000 --content realistic --out big.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from collections.abc import Iterator
from typing import IO, Any, Final

__all__ = ["CONTENT", "generate", "iter_lines", "main"]

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


CONTENT: Final = ("small", "realistic")
"""The content profiles (module docstring)."""


def iter_lines(turns: int, seed: int = 0, content: str = "small") -> Iterator[dict[str, Any]]:
    """Yield the records of a synthetic transcript with exactly ``turns`` message turns.

    Args:
        turns: number of message turns (user prompts, assistant replies, tool results); each
            assistant reply may span several lines with one ``message.id`` (up to two with
            ``small`` content, three with ``realistic``).
        seed: seed of the pseudo-random generator; equal seeds give equal transcripts.
        content: ``"small"`` or ``"realistic"`` (module docstring).

    Yields:
        One JSON object per transcript line, in file order (noise records included).

    Raises:
        ValueError: an unknown ``content`` profile.
    """
    if content == "realistic":
        return _realistic_lines(turns, seed)
    if content != "small":
        raise ValueError(f"unknown content profile {content!r}; one of {', '.join(CONTENT)}")
    return _small_lines(turns, seed)


def _small_lines(turns: int, seed: int) -> Iterator[dict[str, Any]]:
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


_CODE_WORDS = (
    "return",
    "self",
    "value",
    "index",
    "result",
    "handle",
    "path",
    "digest",
    "append",
    "None",
    "True",
    "items",
    "config",
    "timer",
    "state",
    "count",
    "node",
    "parent",
)
_FILES = (
    "src/app.py",
    "src/timer.js",
    "styles.css",
    "index.html",
    "README.md",
    "tests/test_app.py",
)


def _code_pool(rng: random.Random, size: int = 400) -> list[str]:
    """Lines of code-like text (indentation, punctuation, some quotes and backslashes)."""
    pool = []
    for _ in range(size):
        indent = " " * (4 * rng.randint(0, 3))
        words = [rng.choice(_CODE_WORDS) for _ in range(rng.randint(2, 9))]
        shape = rng.random()
        if shape < 0.3:
            line = f"{indent}{words[0]} = {'.'.join(words[1:])}({rng.randint(0, 999)})"
        elif shape < 0.5:
            line = f'{indent}print("{" ".join(words)}\\n")'
        elif shape < 0.6:
            line = f"{indent}# {' '.join(words)} \u2014 na\u00efve r\u00e9sum\u00e9"
        elif shape < 0.7:
            line = ""
        else:
            line = f"{indent}if {words[0]} is not {words[-1]}: {' '.join(words[1:-1])}"
        pool.append(line)
    return pool


def _realistic_lines(turns: int, seed: int) -> Iterator[dict[str, Any]]:
    """The ``realistic`` profile of :func:`iter_lines`."""
    rng = random.Random(seed)
    pool = _code_pool(rng)

    def code(low: int, high: int) -> str:
        """Code-like text of about ``low``-``high`` characters."""
        target = rng.randint(low, high)
        out: list[str] = []
        size = 0
        while size < target:
            line = rng.choice(pool)
            out.append(line)
            size += len(line) + 1
        return "\n".join(out)

    def prose(low: int, high: int) -> str:
        words = _sentence(rng, rng.randint(low, high) // 6 + 1).split(" ")
        for i in range(10, len(words), 13):
            words[i] += rng.choice((".", ",", ":", "\n\n-", "\n", "\u2019s", " \u201cquoted\u201d"))
        return " ".join(words)

    def base64(size: int) -> str:
        return "".join(rng.choices(_B64, k=size))

    def line(kind: str, uid: str, parent: str | None, turn: int, msg: Any) -> dict[str, Any]:
        record = _line(kind, uid, parent, turn, msg)
        record["version"] = "2.0.24"
        if kind == "assistant":
            record["requestId"] = f"req_{rng.getrandbits(96):024x}"
        return record

    parent: str | None = None
    history: list[str | None] = []
    pending: tuple[str, str, dict[str, Any]] | None = None  # (tool id, name, input)
    next_role = "user"
    for turn in range(turns):
        if turn % 97 == 50:
            files = {f: {"backupFileName": f"{_uuid(rng)}@v2", "version": 2} for f in _FILES}
            yield {
                "type": "file-history-snapshot",
                "messageId": _uuid(rng),
                "snapshot": {"messageId": _uuid(rng), "trackedFileBackups": files},
                "isSnapshotUpdate": False,
            }
        if next_role == "user":
            uid = _uuid(rng)
            extra: dict[str, Any] = {}
            if pending is not None:
                tool_id, name, tool_input = pending
                output = code(120, 2400)
                if rng.random() < 0.2:
                    output += f"\n\n{_REMINDER}\n"
                result: Any = output
                if rng.random() < 0.1:
                    result = [{"type": "text", "text": output}]
                content: Any = [{"tool_use_id": tool_id, "type": "tool_result", "content": result}]
                if name == "Read":
                    extra["toolUseResult"] = {
                        "type": "text",
                        "file": {
                            "filePath": tool_input["file_path"],
                            "content": output,
                            "numLines": output.count("\n") + 1,
                            "startLine": 1,
                            "totalLines": output.count("\n") + 1,
                        },
                    }
                elif name == "Edit":
                    extra["toolUseResult"] = {
                        "filePath": tool_input["file_path"],
                        "oldString": tool_input["old_string"],
                        "newString": tool_input["new_string"],
                        "originalFile": output,
                        "structuredPatch": [
                            {
                                "oldStart": 1,
                                "oldLines": 3,
                                "newStart": 1,
                                "newLines": 4,
                                "lines": output.split("\n")[:8],
                            }
                        ],
                        "userModified": False,
                        "replaceAll": False,
                    }
                else:
                    extra["toolUseResult"] = {
                        "stdout": output,
                        "stderr": "",
                        "interrupted": False,
                        "isImage": False,
                    }
                pending = None
            else:
                content = f"turn {turn}: " + prose(60, 900)
                if rng.random() < 0.3:
                    content = (
                        "<system-reminder>\nThe todo list is empty.\n</system-reminder>\n" + content
                    )
                if len(history) > 8 and rng.random() < 0.02:
                    parent = history[-rng.randint(2, 8)]  # a rewind: the DAG branches here
            record = line("user", uid, parent, turn, {"role": "user", "content": content})
            record.update(extra)
            yield record
            parent = uid
            next_role = "assistant"
            continue
        message_id = f"msg_{rng.getrandbits(96):024x}"
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.35:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": prose(200, 1500),
                    "signature": base64(rng.randint(400, 1600)),
                }
            )
        blocks.append({"type": "text", "text": prose(40, 800)})
        if rng.random() < 0.7:
            tool_id = f"toolu_{rng.getrandbits(96):024x}"
            name = rng.choice(_REAL_TOOLS)
            path = f"/home/user/project/{rng.choice(_FILES)}"
            tool_input: dict[str, Any]
            if name == "Edit":
                tool_input = {
                    "file_path": path,
                    "old_string": code(50, 900),
                    "new_string": code(50, 900),
                    "replace_all": False,
                }
            elif name == "Write":
                tool_input = {"file_path": path, "content": code(300, 2500)}
            elif name == "Read":
                tool_input = {"file_path": path}
            elif name == "TodoWrite":
                tool_input = {
                    "todos": [
                        {
                            "content": prose(20, 80),
                            "status": rng.choice(("pending", "in_progress", "completed")),
                            "activeForm": prose(20, 80),
                        }
                        for _ in range(rng.randint(2, 7))
                    ]
                }
            else:
                tool_input = {
                    "command": code(20, 200),
                    "description": prose(10, 60),
                    "timeout": rng.choice((0, 120000)),
                }
            pending = (tool_id, name, tool_input)
            blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        for block in blocks:  # one line per content block, as Claude Code writes them
            uid = _uuid(rng)
            message = {
                "model": "claude-sonnet-4-5-20250929",
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": rng.randint(1, 9),
                    "cache_creation_input_tokens": rng.randint(0, 9999),
                    "cache_read_input_tokens": rng.randint(0, 99999),
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 0,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": rng.randint(1, 999),
                    "service_tier": "standard",
                },
            }
            yield line("assistant", uid, parent, turn, message)
            parent = uid
        if pending is None:
            history.append(parent)
        next_role = "user"
        if len(history) > 16:
            del history[:8]


_REMINDER = "<system-reminder>\nWhenever you read a file, check it.\n</system-reminder>"
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_REAL_TOOLS = ("Bash", "Read", "Edit", "Write", "TodoWrite", "Read", "Bash", "Edit")


def generate(out: IO[str], turns: int, seed: int = 0, content: str = "small") -> int:
    """Write a synthetic transcript of ``turns`` turns to ``out`` (``content``: a profile of
    :func:`iter_lines`); return the lines written."""
    count = 0
    for record in iter_lines(turns, seed, content):
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--turns N`` (default 100000), ``--seed S``, ``--out FILE`` (or stdout)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--content", choices=CONTENT, default="small", help="content profile")
    parser.add_argument("--out", default="-", help="output file, '-' for stdout (default)")
    args = parser.parse_args(argv)
    if args.out == "-":
        lines = generate(sys.stdout, args.turns, args.seed, args.content)
    else:
        with open(args.out, "w", encoding="utf-8") as handle:
            lines = generate(handle, args.turns, args.seed, args.content)
    print(f"{lines} lines, {args.turns} turns", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
