"""Aider importer: sessions, user runs, assistant replies, Aider's own lines, fences, noise,
hostile input."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import run_main, shared_path

from merkle_memory import canonical
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import detect_format, import_file, import_object

SAMPLE = "AbdulAlkawasmeh_metadata-aider.aider.chat.history.md"

HISTORY = """
# aider chat started at 2026-01-01 10:00:00

> Aider v0.86.1§
> Model: openai/gpt-4o-mini with diff edit format§

#### Add a greeting§
#### §
#### to hello.py§

I will edit the file.

hello.py
```python
<<<<<<< SEARCH
=======
print("hi")
#### not a user line, inside the fence
> not Aider's output either
>>>>>>> REPLACE
```

> Tokens: 2.4k sent, 104 received.§
> Applied edit to hello.py§

#### thanks§

You are welcome.

# aider chat started at 2026-01-02 09:00:00

#### again§
""".replace("§", "  ")  # Aider ends its own lines with two spaces

REPLY = """I will edit the file.

hello.py
```python
<<<<<<< SEARCH
=======
print("hi")
#### not a user line, inside the fence
> not Aider's output either
>>>>>>> REPLACE
```"""


def _node(role: str, text: str, parent: str) -> str:
    block = {"type": "text", "is_error": False, "text": text}
    return canonical.digest(
        {"parent": parent, "content": {"type": "message", "role": role, "content": [block]}}
    )


def reference_hashes() -> list[str]:
    """The ids from hand-written preimages: the user run's lines joined (the blank typed line
    is an empty line, which the projection folds away), the reply as written (projected:
    blank lines folded), a new root for the second session."""
    user = _node("user", "Add a greeting\nto hello.py", "")
    reply = _node("assistant", REPLY.replace("\n\n", "\n"), user)
    thanks = _node("user", "thanks", reply)
    welcome = _node("assistant", "You are welcome.", thanks)
    return [user, reply, thanks, welcome, _node("user", "again", "")]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_history_matches_reference(tmp_path: Path) -> None:
    """Two sessions: two roots; the runs, replies, notes and model as the docstring says."""
    result = import_file(write(tmp_path, HISTORY))
    assert result.format == "aider"
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert [n.parent_hash is None for n in result.nodes] == [True, False, False, False, True]
    assert (result.messages, result.skipped) == (5, 4)
    assert dict(result.skip_reasons) == {"tool output": 4}
    first, reply = result.nodes[0], result.nodes[1]
    assert first.metadata == {
        "source": "aider",
        "line": 7,
        "started_at": "2026-01-01 10:00:00",
        "notes": ["Aider v0.86.1", "Model: openai/gpt-4o-mini with diff edit format"],
    }
    assert reply.metadata["notes"] == [
        "Tokens: 2.4k sent, 104 received.",
        "Applied edit to hello.py",
    ]
    assert reply.bucket.model == "openai/gpt-4o-mini" and first.bucket.model is None
    assert reply.bucket.content[0].text == REPLY
    assert result.nodes[4].metadata["started_at"] == "2026-01-02 09:00:00"


def test_same_conversation_as_an_openai_request() -> None:
    """An Aider session and a Chat Completions request of the same turns share their ids."""
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Act as an expert software developer."},
            {"role": "user", "content": "Add a greeting\nto hello.py"},
            {"role": "assistant", "content": REPLY},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "You are welcome."},
        ],
    }
    assert [n.hash for n in import_object(body, "openai").nodes] == reference_hashes()[:4]


def test_aider_output_lines_change_no_id(tmp_path: Path) -> None:
    """More ``> `` lines, anywhere outside a fence, and blank lines: the same ids."""
    noisy = HISTORY.replace("#### thanks  \n", "> Added hello.py to the chat  \n\n#### thanks  \n")
    noisy = noisy.replace("You are welcome.\n", "> Warning: slow  \nYou are welcome.\n\n\n")
    noisy = noisy.replace("I will edit the file.\n", "I will edit the file.\n> Repo-map: on  \n")
    result = import_file(write(tmp_path, noisy))
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert result.skipped == 7


def test_an_unclosed_fence_ends_at_aiders_own_line(tmp_path: Path) -> None:
    """A reply that leaves its fence open still ends at the next user line Aider wrote (its
    lines end with two spaces), and that line is a user turn."""
    text = "# aider chat started at x\n\n#### go  \n\n```python\nprint(1)\n\n#### next  \n"
    result = import_file(write(tmp_path, text))
    assert [n.bucket.role for n in result.nodes] == ["user", "assistant", "user"]
    assert result.nodes[1].bucket.content[0].text == "```python\nprint(1)"


def test_text_before_a_header_and_without_header(tmp_path: Path) -> None:
    """Text before the first user line of a session is an assistant turn; a history without a
    header but with user lines is read; an empty file is an empty history."""
    result = import_file(write(tmp_path, "#### hi  \n\nhello\n"), "aider")
    assert [(n.bucket.role, n.bucket.content[0].text) for n in result.nodes] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    result = import_file(write(tmp_path, "# aider chat started at x\n\nhello\n"))
    assert [n.bucket.role for n in result.nodes] == ["assistant"]
    result = import_file(write(tmp_path, ""), "aider")
    assert (result.nodes, result.messages, result.skipped) == ((), 0, 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["#### a  ", "####   ", "> x  ", ">", "", "text", "```", "~~~~", "# aider"])
        | st.text(max_size=12),
        max_size=25,
    )
)
def test_any_text_imports_or_is_refused_clearly(lines: list[str]) -> None:
    """Property: any UTF-8 text is a history (a forest whose ids recompute) or a
    TranscriptFormatError; a second import agrees."""
    text = "# aider chat started at t\n" + "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "h.md"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            result = import_file(path, "aider")
        except TranscriptFormatError:
            return
        again = import_file(path, "aider")
    assert [n.hash for n in result.nodes] == [n.hash for n in again.nodes]
    seen: set[str] = set()
    for node in result.nodes:
        assert node.valid and (node.parent_hash is None or node.parent_hash in seen)
        seen.add(node.hash)


def test_hostile_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bytes that are not UTF-8 name the file and line; Markdown that is not a history is
    refused by name; the command line prints one error line, exit 1."""
    path = tmp_path / "h.md"
    path.write_bytes(b"# aider chat started at x\n#### hi  \n\xff\xfe\n")
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path)
    assert str(info.value) == f"{path}:3: not UTF-8 text (invalid start byte)"
    assert (info.value.path, info.value.line) == (str(path), 3)
    other = tmp_path / "README.md"
    other.write_text("# Title\n\nSome text.\n")
    with pytest.raises(TranscriptFormatError) as info:
        import_file(other, "aider")
    assert str(info.value) == (
        f"{other} is not an aider chat history (no '# aider chat started at' header and no "
        "'#### ' line)"
    )
    code, out, err = run_main(capsys, "dag", "import", str(path))
    assert (code, out, err) == (1, "", f"error: {path}:3: not UTF-8 text (invalid start byte)\n")


def test_detection(tmp_path: Path) -> None:
    """A history is detected by its header; other Markdown is not."""
    assert detect_format(write(tmp_path, HISTORY)) == "aider"
    other = tmp_path / "notes.md"
    other.write_text("# Notes\n#### a heading  \n")
    with pytest.raises(TranscriptFormatError, match="cannot detect"):
        detect_format(other)


def test_real_history_details() -> None:
    """The real history: its twelve user runs join their lines (80 in the file; the run at
    line 238 starts with an empty typed line, which is trimmed: 79 in the texts), its replies
    keep their SEARCH/REPLACE blocks, and its model comes from the ``> Model:`` line."""
    result = import_file(shared_path("real_inputs", SAMPLE))
    users = [n for n in result.nodes if n.bucket.role == "user"]
    replies = [n for n in result.nodes if n.bucket.role == "assistant"]
    assert len(users) == len(replies) == 12
    assert sum(n.bucket.content[0].text.count("\n") + 1 for n in users) == 79
    assert sum(n.bucket.content[0].text.count("<<<<<<< SEARCH") for n in replies) == 24
    assert {n.bucket.model for n in replies} == {"openrouter/openai/gpt-4o-mini"}
