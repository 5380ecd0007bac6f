"""Deeply nested transcript content in every importer (issue 14 item 6): the model's one limit
(``MAX_VALUE_DEPTH`` = ``canonical.MAX_DEPTH - 4`` = 508 levels of a ``tool_input``) holds
for files and parsed objects alike, one level past it is a ``TranscriptFormatError``, and a
text too deep for the stdlib parser (100,000 ``[``) is one too; never a ``RecursionError``,
and the command line prints one ``error:`` line and exits 1.

Every format below carries the same conversation (user "hi", then an assistant ``tool_use``
``t1``/``x`` with the nested arguments), so every format gives the same two node ids, which
are digests of preimages written out here by hand (DESIGN section 3).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import nest, run_main

from merkle_memory import canonical
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import FORMAT_NAMES, detect_format, import_file, import_object

LIMIT = 508
TOO_DEEP = "nested deeper than 508 levels (canonical.MAX_DEPTH - 4)"


MARK = "@nested@"
"""Stands for the nested value in a document written as text (see :func:`text`)."""


def text(value: Any, levels: int) -> str:
    """JSON text of ``value`` with the string :data:`MARK` replaced by ``nest(levels)``, written
    without recursion (the stdlib encoder stops near 1,000 levels, canonical at 512)."""
    inner = '{"a":' * (levels - 1) + '{"k":1}' + "}" * (levels - 1)
    return json.dumps(value).replace(json.dumps(MARK), inner)


def expected_ids(levels: int) -> tuple[str, str]:
    """The ids of user "hi" and of the assistant tool call with ``nest(levels)``."""
    user = canonical.digest(
        {"parent": "", "content": {"type": "message", "role": "user",
         "content": [{"type": "text", "is_error": False, "text": "hi"}]}}
    )  # fmt: skip
    call = {"type": "tool_use", "is_error": False, "tool_use_id": "t1", "tool_name": "x",
            "tool_input": nest(levels)}  # fmt: skip
    assistant = canonical.digest(
        {"parent": user, "content": {"type": "message", "role": "assistant", "content": [call]}}
    )
    return user, assistant


def claude_code(levels: int) -> str:
    lines: list[dict[str, Any]] = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "hi"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"id": "m1", "role": "assistant", "content": [
             {"type": "tool_use", "id": "t1", "name": "x", "input": MARK}]}},
    ]  # fmt: skip
    return "".join(text(line, levels) + "\n" for line in lines)


def codex(levels: int) -> str:
    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "r"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message",
         "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "function_call",
         "call_id": "t1", "name": "x", "arguments": text(MARK, levels)}},
    ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines)


def anthropic(levels: int) -> dict[str, Any]:
    """The request body; ``levels=0`` puts :data:`MARK` in place of the nested value."""
    return {"max_tokens": 1, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "x",
             "input": nest(levels) if levels else MARK}]},
    ]}  # fmt: skip


def _call(levels: int) -> dict[str, Any]:
    return {"id": "t1", "type": "function",
            "function": {"name": "x", "arguments": text(MARK, levels)}}  # fmt: skip


def openai(levels: int) -> dict[str, Any]:
    return {"model": "gpt", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [_call(levels)]},
    ]}  # fmt: skip


def letta(levels: int) -> dict[str, Any]:
    return {"agent_type": "memgpt_agent", "core_memory": [], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [], "tool_calls": [_call(levels)]},
    ]}  # fmt: skip


def gemini(levels: int) -> dict[str, Any]:
    return {"sessionId": "s", "projectHash": "p", "messages": [
        {"id": "1", "type": "user", "content": [{"text": "hi"}]},
        {"id": "2", "type": "gemini", "content": "",
         "toolCalls": [{"id": "t1", "name": "x", "args": nest(levels)}]},
    ]}  # fmt: skip


def gemini_lines(levels: int) -> str:
    """The JSONL form of :func:`gemini` (metadata line, then one message a line)."""
    doc = gemini(levels)
    return "".join(
        json.dumps(line) + "\n"
        for line in [{"sessionId": "s", "projectHash": "p"}, *doc["messages"]]
    )


def cline(levels: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nhi\n</task>"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "x", "input": nest(levels)}]},
    ]  # fmt: skip


DOCUMENTS: dict[str, Callable[[int], Any]] = {
    "anthropic": anthropic,
    "openai": openai,
    "letta": letta,
    "gemini": gemini,
    "cline": cline,
}
LINES: dict[str, Callable[[int], str]] = {"claude-code": claude_code, "codex": codex}
NO_JSON_VALUES = {"aider": "an Aider history is Markdown: no tool call carries a JSON value"}


def write(tmp_path: Path, name: str, levels: int) -> Path:
    if name in LINES:
        path = tmp_path / f"{name}.jsonl"
        path.write_text(LINES[name](levels), encoding="utf-8")
    else:
        path = tmp_path / f"{name}.json"
        # Only the Anthropic body holds the nested value itself (the others hold its text).
        doc = (
            text(anthropic(0), levels)
            if name == "anthropic"
            else json.dumps(DOCUMENTS[name](levels))
        )
        path.write_text(doc, encoding="utf-8")
    return path


def test_every_format_is_covered() -> None:
    """Every format name is tested here, or said to carry no JSON value to nest."""
    assert sorted([*LINES, *DOCUMENTS, *NO_JSON_VALUES]) == sorted(FORMAT_NAMES)


def test_gemini_lines_at_and_past_the_limit(tmp_path: Path) -> None:
    """The JSONL form of a Gemini CLI session: 508 levels give the hand-built ids (as the
    JSON form does), 509 the depth error naming the file and line."""
    path = tmp_path / "session.jsonl"
    path.write_text(gemini_lines(LIMIT), encoding="utf-8")
    assert tuple(n.hash for n in import_file(path).nodes) == expected_ids(LIMIT)
    path.write_text(gemini_lines(LIMIT + 1), encoding="utf-8")
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path, "gemini")
    assert str(info.value).startswith(f"{path}:3: ")
    assert str(info.value).endswith(TOO_DEEP)


@pytest.mark.parametrize("name", sorted([*LINES, *DOCUMENTS]))
@pytest.mark.parametrize("detect", ["auto", "named"])
def test_file_at_the_limit_imports_with_hand_built_ids(
    tmp_path: Path, name: str, detect: str
) -> None:
    """A tool call 508 deep imports (detected or named) to the two hand-built ids."""
    path = write(tmp_path, name, LIMIT)
    result = import_file(path, "auto" if detect == "auto" else name)
    assert result.format == name
    assert tuple(n.hash for n in result.nodes) == expected_ids(LIMIT)


@pytest.mark.parametrize("name", sorted([*LINES, *DOCUMENTS]))
def test_file_one_past_the_limit_is_refused(tmp_path: Path, name: str) -> None:
    """509 levels: a TranscriptFormatError naming the file and the one depth text."""
    path = write(tmp_path, name, LIMIT + 1)
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path, name)
    assert str(info.value).startswith(str(path))
    assert str(info.value).endswith(TOO_DEEP)
    assert info.value.path == str(path)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_object_at_and_past_the_limit(name: str) -> None:
    """read_object / import_object: 508 levels give the hand-built ids, 509 the depth error."""
    result = import_object(DOCUMENTS[name](LIMIT), name)
    assert tuple(n.hash for n in result.nodes) == expected_ids(LIMIT)
    with pytest.raises(TranscriptFormatError) as info:
        import_object(DOCUMENTS[name](LIMIT + 1), name)
    assert str(info.value).endswith(TOO_DEEP)


@pytest.mark.parametrize("name", sorted([*LINES, *DOCUMENTS]))
@pytest.mark.parametrize("newline", [True, False], ids=["line", "no-newline"])
def test_a_text_too_deep_for_the_parser_is_a_library_error(
    tmp_path: Path, name: str, newline: bool
) -> None:
    """100,000 ``[`` (and 100,000 nested objects) never escape as RecursionError: the named
    format refuses them with the depth text (a JSONL format skips an unterminated last line
    as torn, as it skips any); ``auto`` cannot detect them."""
    for text in (b"[" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
        path = tmp_path / "deep.jsonl"
        path.write_bytes(text + (b"\n" if newline else b""))
        with pytest.raises(TranscriptFormatError, match="cannot detect"):
            import_file(path)
        if name in LINES and not newline:
            assert import_file(path, name).skipped == 1
            continue
        with pytest.raises(TranscriptFormatError) as info:
            import_file(path, name)
        assert str(info.value).endswith(f"JSON text: {TOO_DEEP}")


def test_deep_arguments_text_in_a_request() -> None:
    """Arguments text too deep for the parser: an object is refused with the depth text,
    anything else (an array, not JSON) is kept as ``{"arguments": raw}`` like other text."""
    body = openai(1)
    call = body["messages"][2]["tool_calls"][0]["function"]
    call["arguments"] = '{"a":' * 100_000 + "1" + "}" * 100_000
    with pytest.raises(TranscriptFormatError) as info:
        import_object(body, "openai")
    assert str(info.value).endswith(f"tool arguments: JSON text: {TOO_DEEP}")
    call["arguments"] = "[" * 100_000
    node = import_object(body, "openai").nodes[1]
    assert node.bucket.content[0].tool_input == {"arguments": "[" * 100_000}


@pytest.mark.parametrize("name", sorted([*LINES, *DOCUMENTS]))
def test_cli_one_error_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``dag import`` one level past the limit: exit 1, one ``error:`` line, no traceback."""
    path = write(tmp_path, name, LIMIT + 1)
    code, out, err = run_main(capsys, "dag", "import", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {path}") and err.endswith(f"{TOO_DEEP}\n")
    assert err.count("\n") == 1 and "Traceback" not in err
    deep = tmp_path / "brackets.jsonl"
    deep.write_bytes(b"[" * 100_000 + b"\n")
    code, out, err = run_main(capsys, "dag", "import", "--format", name, str(deep))
    assert (code, out, err.count("\n")) == (1, "", 1)
    assert err.startswith(f"error: {deep}") and err.endswith(f"JSON text: {TOO_DEEP}\n")


@pytest.mark.parametrize("levels", [990, 5_000])
def test_a_session_whose_only_line_is_too_deep_is_detected(tmp_path: Path, levels: int) -> None:
    """A Claude Code session whose first (here: only) line is too deep for the parser is
    still detected as Claude Code by its signature key (found by the adversarial trial: it
    said "cannot detect"), so ``auto`` refuses it with the depth text, as the named format
    does."""
    line = {"type": "assistant", "uuid": "a1", "parentUuid": None, "sessionId": "s",
            "message": {"id": "m1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "x", "input": MARK}]}}  # fmt: skip
    path = tmp_path / "deep.jsonl"
    path.write_text(text(line, levels) + "\n", encoding="utf-8")
    assert detect_format(path) == "claude-code"
    for fmt in ("auto", "claude-code"):
        with pytest.raises(TranscriptFormatError) as info:
            import_file(path, fmt)
        assert str(info.value) == f"{path}:1: JSON text: {TOO_DEEP}"
