"""merkle_memory quick start: hash a value, build a conversation DAG, import a transcript.

Run it from anywhere (``python examples/quickstart.py``, ``python - < quickstart.py``) or paste
it into a notebook cell; the output is the same. Nothing to install: if merkle_memory is not
installed, the checkout this file sits in is used.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def _here() -> Path:
    """The folder of this script, or the working directory when pasted into a notebook."""
    try:
        return Path(__file__).resolve().parent
    except NameError:
        return Path.cwd()


try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    for candidate in (_here().parent, Path.cwd(), Path.cwd().parent):
        if (candidate / "merkle_memory" / "__init__.py").is_file():
            sys.path.insert(0, str(candidate))
            break

from merkle_memory import canonical  # noqa: E402 (after the path fallback above)
from merkle_memory.dag import Bucket, ContentBlock, Dag, Node  # noqa: E402
from merkle_memory.transcripts import import_file  # noqa: E402


def text_turn(role: str, text: str) -> Bucket:
    """One message with a single text block."""
    return Bucket("message", role, (ContentBlock("text", text=text),))


# 1. Canonical JSON (RFC 8785) and content ids ---------------------------------------------
value = {"b": [1.0, 2e-7], "a": "héllo"}
print("1. canonical bytes:", canonical.dumps(value).decode())
print("   id (SHA-256):   ", canonical.digest(value))

# 2. A conversation DAG: each node's id commits to its content and to its parent's id -------
dag = Dag()
question = dag.add(Node.create(text_turn("user", "What is a Merkle DAG?")))
answer = dag.add(
    Node.create(text_turn("assistant", "A graph whose node ids hash their parents."), question.hash)
)
follow_up = dag.add(Node.create(text_turn("user", "Show me an example."), answer.hash))
dag.add(Node.create(text_turn("user", "Explain it to a child."), answer.hash))
print("\n2. a DAG of", dag.size(), "nodes; the answer is a branch point:", answer.is_branching())
for leaf in dag.leaves():
    path = " <- ".join(n.hash[:8] for n in dag.ancestors(leaf.hash) or [])
    print("   leaf", leaf.hash[:16], "path to the root:", path)

# 3. Harness noise does not change ids ------------------------------------------------------
noisy = text_turn(
    "user",
    "<system-reminder>\nToday's date is 2026-03-02.\n</system-reminder>\nShow me an example.",
)
same = Node.create(noisy, answer.hash)
print("\n3. wrapped in a <system-reminder>, the turn keeps its id:", same.hash == follow_up.hash)

# 4. A Claude Code session transcript (with a rewind branch and harness tags) ---------------
# The session beside this script (examples/claude_code_session.jsonl), or, when the script
# runs elsewhere (a notebook cell, ``python - < quickstart.py``), the same session rebuilt
# from the lines below (only the fields the import reads), so the output is the same anywhere.
REMINDER = "<system-reminder>\n{}\n</system-reminder>"


def user(uuid: str, parent: str | None, content: object) -> dict[str, object]:
    """A Claude Code user line (only the fields the import reads)."""
    message = {"role": "user", "content": content}
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "message": message}


def assistant(uuid: str, parent: str, message_id: str, block: object) -> dict[str, object]:
    """A Claude Code assistant line: one content block of API message ``message_id``."""
    message = {"id": message_id, "role": "assistant", "content": [block]}
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}


def text(value: str) -> dict[str, str]:
    """A text content block."""
    return {"type": "text", "text": value}


SESSION = [
    {"type": "file-history-snapshot", "messageId": "u-0001"},
    user(
        "u-0001",
        None,
        REMINDER.format("Today's date is 2026-03-02.") + "\nHow many lines does notes.txt have?",
    ),
    assistant("a-0001", "u-0001", "msg_01A", text("I'll count them with wc.")),
    assistant(
        "a-0002",
        "a-0001",
        "msg_01A",
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "Bash",
            "input": {"command": "wc -l notes.txt", "description": "Count lines"},
        },
    ),
    user(
        "r-0001",
        "a-0002",
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "42 notes.txt\n" + REMINDER.format("The file notes.txt was read."),
            }
        ],
    ),
    assistant("a-0003", "r-0001", "msg_02B", text("notes.txt has 42 lines.")),
    user("u-0002", "a-0003", "Summarise it in one sentence."),
    assistant(
        "a-0004", "u-0002", "msg_03C", text("It is a packing list for a three-day hiking trip.")
    ),
    {"type": "system", "uuid": "s-0001", "parentUuid": "a-0004", "content": "/rewind"},
    user("u-0003", "a-0003", "Actually, just show me the first three lines."),
    assistant("a-0005", "u-0003", "msg_04D", text("The first three lines are: tent, stove, map.")),
    user("u-0004", "a-0005", "<command-name>/cost</command-name>"),
    user("u-0005", "u-0004", "<local-command-stdout>Total cost: $0.01</local-command-stdout>"),
    user("u-0006", "u-0005", [text("Thanks!\n" + REMINDER.format("notes.txt opened in the IDE."))]),
    assistant("a-0006", "u-0006", "msg_05E", text("You're welcome. Have a good trip!")),
]
"""examples/claude_code_session.jsonl, shortened to what is hashed: the same lines, links and
hashed content (13 messages, 2 other lines, a rewind branch, 2 turns of harness noise only)."""


name = "claude_code_session.jsonl"
candidates = [_here() / name, Path.cwd() / "examples" / name, Path.cwd() / name]
found = next((p for p in candidates if p.is_file()), None)
with tempfile.TemporaryDirectory() as scratch:
    example = found or Path(scratch) / name
    if found is None:
        lines = (json.dumps(line) + "\n" for line in SESSION)
        example.write_text("".join(lines), encoding="utf-8")
    result = import_file(example)
print(
    f"\n4. {example.name}: {result.messages} messages, {result.skipped} other lines -> "
    f"{len(result.nodes)} nodes ({result.dropped} turns were only harness noise)"
)
transcript = Dag()
for node in result.nodes:
    transcript.add(node)
for leaf in transcript.leaves():
    last_text = next((b.text for b in leaf.bucket.content if b.text), "")
    print(f"   leaf {leaf.hash[:16]}  {leaf.bucket.role}: {last_text}")
