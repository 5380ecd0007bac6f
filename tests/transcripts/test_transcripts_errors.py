"""Transcript errors name their file (and line), an explicit format checks the file's shape,
and the parsing policy for repeated keys (the last value wins) holds in every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory.cli import main
from merkle_memory.errors import ContentBlockError, NodeFormatError, TranscriptFormatError
from merkle_memory.transcripts import (
    FORMATS,
    Importer,
    anthropic,
    detect_format,
    import_file,
    import_object,
    letta,
    openai,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claude_code_session.jsonl"

NAN = "JSON value: NaN or infinity is not a JSON number"
SURROGATE = "block field 'text': lone UTF-16 surrogate in a string"


def _cc_lines(content: str) -> str:
    """A two-line Claude Code session whose assistant message content is ``content`` (JSON)."""
    user = {"type": "user", "uuid": "u1", "parentUuid": None,
            "message": {"role": "user", "content": "hi"}}  # fmt: skip
    first = json.dumps(user)
    second = (
        '{"type": "assistant", "uuid": "a1", "parentUuid": "u1", '
        f'"message": {{"role": "assistant", "id": "m1", "content": {content}}}}}'
    )
    return f"{first}\n{second}\n"


def _codex_lines(item: str) -> str:
    meta = '{"type": "session_meta", "payload": {"id": "s"}}'
    return f'{meta}\n{{"type": "response_item", "payload": {item}}}\n'


OPENAI_CALL_NAN = (
    '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, '
    '"tool_calls": [{"id": "c1", "type": "function", '
    '"function": {"name": "f", "arguments": "{\\"x\\": NaN}"}}]}]}'
)

# (file name, content, expected message after "NAME", expected line)
CASES: list[tuple[str, str, str, int | None]] = [
    ("o.json", OPENAI_CALL_NAN, f": openai: messages[1]: {NAN}", None),
    (
        "o.json",
        '{"messages": [{"role": "system", "content": "s"}, '
        '{"role": "user", "content": "a\\ud800"}]}',
        f": openai: messages[1]: {SURROGATE}",
        None,
    ),
    (
        "o.json",
        '{"messages": [{"role": "user", "content": 42}]}',
        ": openai: messages[0]: content must be a string or a list of parts",
        None,
    ),
    (
        "o.json",
        '{"messages": [{"role": "system", "content": "a\\ud800"}, '
        '{"role": "user", "content": "x"}]}',
        ": node metadata: lone UTF-16 surrogate in a string",
        None,
    ),
    (
        "a.json",
        '{"max_tokens": 1, "messages": [{"role": "user", "content": "a\\ud800"}]}',
        f": anthropic: messages[0]: {SURROGATE}",
        None,
    ),
    (
        "l.json",
        '{"agent_type": "x", "messages": [{"role": "assistant", "content": [], "tool_calls": '
        '[{"id": "c", "function": {"name": "f", "arguments": {"x": NaN}}}]}]}',
        f": letta: messages[0]: {NAN}",
        None,
    ),
    (
        "l.json",
        '{"agent_type": "x", "messages": [{"role": "user", "content": "x", "id": "\\udc00"}]}',
        ": letta: messages[0]: metadata: lone UTF-16 surrogate in a string",
        None,
    ),
    (
        "s.jsonl",
        _cc_lines('[{"type": "tool_use", "id": "t", "name": "n", "input": {"x": NaN}}]'),
        ":2: block field 'tool_input': NaN or infinity is not a JSON number",
        2,
    ),
    ("s.jsonl", _cc_lines("42"), ":2: message content must be a string or a list", 2),
    (
        "r.jsonl",
        _codex_lines(
            '{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\\"x\\": NaN}"}'
        ),
        f":2: {NAN}",
        2,
    ),
    (
        "r.jsonl",
        _codex_lines('{"type": "message", "role": "user", "content": 7}'),
        ":2: codex: message content must be a list of parts",
        2,
    ),
    (
        "r.jsonl",
        '{"type": "session_meta", "payload": {"id": "\\ud800"}}\n'
        + _codex_lines('{"type": "message", "role": "user", "content": "x"}').split("\n", 1)[1],
        ":2: metadata: lone UTF-16 surrogate in a string",
        2,
    ),
    (
        "r.jsonl",
        _codex_lines('{"type": "message", "role": "user", "content": "x"}') + "nope\n",
        ":3: not a JSON line (Expecting value: line 1 column 1 (char 0))",
        3,
    ),
    ("b.json", '{"messages": [}', ": not JSON (Expecting value: line 1 column 15 (char 14))", 1),
]


@pytest.mark.parametrize(
    ("name", "content", "message", "line"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_import_file_errors_name_the_file(
    tmp_path: Path, name: str, content: str, message: str, line: int | None
) -> None:
    """Every TranscriptFormatError of import_file starts with FILE[:LINE], sets path and line,
    and keeps the error found as __cause__."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TranscriptFormatError) as caught:
        import_file(path)
    error = caught.value
    assert str(error) == f"{path}{message}"
    assert (error.path, error.line) == (str(path), line)
    assert error.__cause__ is not None
    assert str(error.__cause__) in message


def test_cli_names_the_failing_file_among_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dag import of a good file and a bad one: the one error line names the bad file."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [{"role": "user", "content": 42}]}')
    assert main(["dag", "import", str(EXAMPLE), str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: {bad}: openai: messages[0]: content must be a string or a list of parts\n"
    )


def test_error_constructor_is_backward_compatible() -> None:
    """TranscriptFormatError(message) still works; path and line default to None."""
    error = TranscriptFormatError("plain")
    assert (str(error), error.path, error.line) == ("plain", None, None)
    assert isinstance(error, ValueError)


# --- an explicit format checks the shape -------------------------------------------------------

OPENAI_BODY = {
    "model": "gpt-x",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ],
}  # fmt: skip
ANTHROPIC_BODY = {
    "max_tokens": 10,
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n"}]},
    ],
}
LETTA_AGENT = {"agent_type": "memgpt_agent", "messages": [{"role": "user", "content": "hi"}]}
LETTA_KEYS = "core_memory, in_context_message_indices, agent_type, llm_config"
CODEX_ROLLOUT = _codex_lines('{"type": "message", "role": "user", "content": "x"}')

REFUSALS: list[tuple[str, str, str]] = [
    (json.dumps(OPENAI_BODY), "letta", f"is not a letta agent file (none of the agent keys "
     f"{LETTA_KEYS})"),
    (json.dumps(LETTA_AGENT), "openai", "is not an openai request body (it has 'agent_type', "
     "a Letta agent file key)"),
    (json.dumps(LETTA_AGENT), "anthropic", "is not an anthropic request body (it has "
     "'agent_type', a Letta agent file key)"),
    (json.dumps(ANTHROPIC_BODY), "openai", "is not an openai request body (messages[1] has a "
     "'tool_use' block, an Anthropic content type)"),
    (json.dumps({"system": "x", "messages": [{"role": "user", "content": "hi"}]}), "openai",
     "is not an openai request body (it has a top-level 'system', an Anthropic request key)"),
    (json.dumps(OPENAI_BODY), "anthropic", "is not an anthropic request body (messages[0] has "
     "the role 'system', an OpenAI role)"),
    (json.dumps({"messages": [{"role": "user", "content": "x", "tool_call_id": "c"}]}),
     "anthropic", "is not an anthropic request body (messages[0] has 'tool_call_id', an OpenAI "
     "message key)"),
    ("[1, 2]", "letta", "is not a letta agent file (not a JSON object)"),
    ('{"model": "x"}', "openai", "is not an openai request body (no 'messages' list)"),
    (json.dumps(OPENAI_BODY), "claude-code", "is not a claude-code session (no line has a "
     "'parentUuid' key or is a 'summary' with a 'leafUuid')"),
    (CODEX_ROLLOUT, "claude-code", "is not a claude-code session (no line has a 'parentUuid' "
     "key or is a 'summary' with a 'leafUuid')"),
    (EXAMPLE.read_text(encoding="utf-8"), "codex", "is not a codex rollout (no line is a "
     "rollout envelope or a response item)"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "format_name", "message"), REFUSALS)
def test_explicit_format_refuses_another_shape(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    format_name: str,
    message: str,
) -> None:
    """--format F on a file of another shape: one line 'error: FILE is not ... (why)', exit 1,
    nothing on stdout; import_file raises the same text with path set."""
    path = tmp_path / "input.json"
    path.write_text(content, encoding="utf-8")
    assert main(["dag", "import", str(path), "--format", format_name]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {path} {message}\n")
    with pytest.raises(TranscriptFormatError) as caught:
        import_file(path, format_name)
    assert (str(caught.value), caught.value.path) == (f"{path} {message}", str(path))


def test_import_object_refuses_another_shape() -> None:
    """import_object with an explicit format checks the value's shape too (no file named)."""
    with pytest.raises(TranscriptFormatError) as caught:
        import_object(OPENAI_BODY, "letta")
    assert str(caught.value) == f"not a letta agent file (none of the agent keys {LETTA_KEYS})"
    assert caught.value.path is None


@pytest.mark.parametrize(
    ("content", "format_name", "nodes"),
    [
        (json.dumps(OPENAI_BODY), "openai", 3),
        (json.dumps(ANTHROPIC_BODY), "anthropic", 2),
        (json.dumps(LETTA_AGENT), "letta", 1),
        (CODEX_ROLLOUT, "codex", 1),
        ("", "claude-code", 0),  # an empty session (just created) is a session
        ("\n", "codex", 0),
    ],
)
def test_explicit_format_accepts_its_own_shape(
    tmp_path: Path, content: str, format_name: str, nodes: int
) -> None:
    """A file of the format asked for imports; an empty JSONL file is an empty transcript."""
    path = tmp_path / "input"
    path.write_text(content, encoding="utf-8")
    result = import_file(path, format_name)
    assert (result.format, len(result.nodes)) == (format_name, nodes)


_PARTS = st.sampled_from(["text", "image_url", "tool_use", "tool_result", "thinking", "input_text"])
_MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer", "wizard"])},
    optional={
        "content": st.one_of(
            st.just("hi"),
            st.lists(_PARTS.map(lambda kind: {"type": kind, "text": "x"}), max_size=2),
        ),
        "tool_calls": st.just([]),
        "tool_call_id": st.just("c"),
    },
)
_BODIES = st.fixed_dictionaries(
    {"messages": st.lists(_MESSAGES, min_size=1, max_size=3)},
    optional={
        "system": st.just("s"),
        "max_tokens": st.just(5),
        "agent_type": st.just("a"),
        "anthropic_version": st.just("v"),
        "model": st.just("m"),
    },
)
_SHAPES: dict[str, Any] = {
    "openai": openai.shape_problem,
    "anthropic": anthropic.shape_problem,
    "letta": letta.shape_problem,
}


@settings(max_examples=150, deadline=None)
@given(_BODIES)
def test_detected_format_always_passes_its_shape_check(body: dict[str, Any]) -> None:
    """Whatever detection picks for a request-like body, that format's explicit shape check
    accepts it (so --format auto never refuses what it detected); letta's check is exactly
    its detection signature."""
    assert (letta.shape_problem(body) is None) == letta.looks_like(body)
    try:
        name = detect_format(body)
    except TranscriptFormatError:
        return
    assert name in FORMATS
    assert _SHAPES[name](body) is None


# --- parsing policy: a repeated key keeps its last value -------------------------------------


def test_repeated_key_keeps_last_value_in_every_format(tmp_path: Path) -> None:
    """A key repeated in one JSON object keeps its last value, silently (documented policy):
    the node is the one of the same file without the first value."""
    pairs = {
        "s.jsonl": (
            _cc_lines('"first"').replace('"content": "first"', '"content": "x", "content": "y"'),
            _cc_lines('"y"'),
        ),
        "o.json": (
            '{"messages": [{"role": "user", "content": "x", "content": "y"}]}',
            '{"messages": [{"role": "user", "content": "y"}]}',
        ),
        "r.jsonl": (
            _codex_lines('{"type": "message", "role": "user", "content": "x", "content": "y"}'),
            _codex_lines('{"type": "message", "role": "user", "content": "y"}'),
        ),
    }
    for name, (repeated, plain) in pairs.items():
        (tmp_path / name).write_text(repeated, encoding="utf-8")
        (tmp_path / f"plain-{name}").write_text(plain, encoding="utf-8")
        got = [n.hash for n in import_file(tmp_path / name).nodes]
        want = [n.hash for n in import_file(tmp_path / f"plain-{name}").nodes]
        assert got == want and got, name


def test_model_errors_are_re_raised_as_transcript_errors() -> None:
    """A malformed block or node met while importing a document is a TranscriptFormatError
    with the model error's text, the model error kept as __cause__."""
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "\ud800"}, {"role": "user", "content": "hi"}],
    }
    with pytest.raises(TranscriptFormatError) as info:
        import_object(body, "openai")
    assert str(info.value) == "node metadata: lone UTF-16 surrogate in a string"
    assert isinstance(info.value.__cause__, NodeFormatError)
    tool = {"type": "tool_use", "id": "t", "name": "n", "input": {"a": float("nan")}}
    with pytest.raises(TranscriptFormatError) as info:
        import_object({"messages": [{"role": "assistant", "content": [tool]}]}, "anthropic")
    assert str(info.value) == (
        "anthropic: messages[0]: block field 'tool_input': NaN or infinity is not a JSON number"
    )
    assert isinstance(info.value.__cause__, ContentBlockError)


def test_importer_needs_one_way_to_read() -> None:
    """An Importer reads by streaming its file, by parsing one document, or both."""
    with pytest.raises(TranscriptFormatError, match="needs read_path or parse"):
        Importer("x", None, lambda head: False)
    line_based = FORMATS["claude-code"]
    assert not line_based.is_document and FORMATS["letta"].is_document
    with pytest.raises(TranscriptFormatError, match="read from files only"):
        line_based.read_object({})
