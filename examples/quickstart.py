"""merkle_memory quick start: hash a value, build a conversation DAG, import a transcript.

Run it from anywhere (``python examples/quickstart.py``) or paste it into a notebook cell.
Nothing to install: if merkle_memory is not installed, the checkout this file sits in is used.
"""

from __future__ import annotations

import sys
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
name = "claude_code_session.jsonl"
candidates = [_here() / name, Path.cwd() / "examples" / name, Path.cwd() / name]
example = next((p for p in candidates if p.is_file()), None)
if example is None:
    print("\n4. examples/claude_code_session.jsonl not found; skipped")
else:
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
