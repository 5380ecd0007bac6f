"""Gemini CLI importer: both session forms, tool calls and their results, thoughts, notices,
``$set`` patches and re-written messages, noise, hostile input."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import run_main, shared_path

from merkle_memory import canonical
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import detect_format, import_file, import_object
from merkle_memory.transcripts.gemini import sniff

SAMPLE_JSON = "yoavf_ai-sessions_gemini-cli-pomodoro-timer.json"
SAMPLE_LINES = "Mai0313_VibeCodingTracker_gemini.jsonl"

SESSION: dict[str, Any] = {
    "sessionId": "s-1",
    "projectHash": "p" * 64,
    "startTime": "2026-01-01T00:00:00.000Z",
    "lastUpdated": "2026-01-01T00:05:00.000Z",
    "messages": [
        {"id": "m1", "timestamp": "t1", "type": "user", "content": "What is in /tmp?"},
        {
            "id": "m2",
            "timestamp": "t2",
            "type": "gemini",
            "content": "Let me look.",
            "model": "gemini-2.5-pro",
            "tokens": {"input": 10, "output": 2},
            "thoughts": [
                {"subject": "Listing", "description": "I will list /tmp.", "timestamp": "t"}
            ],
            "toolCalls": [
                {
                    "id": "call_1",
                    "name": "Bash",
                    "args": {"command": "ls /tmp", "timeout": 0},
                    "status": "success",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "call_1",
                                "name": "Bash",
                                "response": {"output": "a\nb"},
                            }
                        }
                    ],
                },
                {
                    "id": "call_2",
                    "name": "Read",
                    "args": {"path": "/tmp/a"},
                    "status": "error",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "call_2",
                                "name": "Read",
                                "response": {"error": "no such file"},
                            }
                        }
                    ],
                },
            ],
        },
        {"id": "m3", "timestamp": "t3", "type": "gemini", "content": "Only a and b."},
    ],
}


def _block(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "is_error": False, **fields}


def reference_hashes() -> list[str]:
    """The chain's ids from hand-written preimages (DESIGN section 3): thinking first, then
    text, then the calls; the results one user node; ``timeout: 0`` pruned."""
    contents = [
        ("user", [_block("text", text="What is in /tmp?")]),
        (
            "assistant",
            [
                _block("thinking", thinking="**Listing**\nI will list /tmp."),
                _block("text", text="Let me look."),
                _block("tool_use", tool_use_id="call_1", tool_name="Bash",
                       tool_input={"command": "ls /tmp"}),
                _block("tool_use", tool_use_id="call_2", tool_name="Read",
                       tool_input={"path": "/tmp/a"}),
            ],
        ),
        (
            "user",
            [
                _block("tool_result", tool_result_id="call_1", tool_output="a\nb"),
                {"type": "tool_result", "is_error": True, "tool_result_id": "call_2",
                 "tool_output": "no such file"},
            ],
        ),
        ("assistant", [_block("text", text="Only a and b.")]),
    ]  # fmt: skip
    hashes: list[str] = []
    parent = ""
    for role, blocks in contents:
        parent = canonical.digest(
            {"parent": parent, "content": {"type": "message", "role": role, "content": blocks}}
        )
        hashes.append(parent)
    return hashes


def lines_of(session: dict[str, Any], *, rewrites: bool = True, noise: bool = True) -> str:
    """The JSONL form of ``session``: metadata first, each message on a line; with
    ``rewrites`` every gemini message is written first without its tool calls and thoughts
    and then again whole; with ``noise`` ``$set`` patches and notices come between."""
    meta = {k: v for k, v in session.items() if k != "messages"}
    out = [meta]
    for message in session["messages"]:
        if rewrites and message["type"] == "gemini":
            out.append({k: v for k, v in message.items() if k not in ("toolCalls", "thoughts")})
            if noise:
                out.append({"$set": {"lastUpdated": "later"}})
        out.append(message)
        if noise:
            out.append({"id": f"n-{message['id']}", "type": "info", "content": "Saved."})
            out.append({"$set": {"lastUpdated": message["timestamp"]}})
    return "".join(json.dumps(r) + "\n" for r in out)


def test_json_form_matches_reference(tmp_path: Path) -> None:
    """The JSON form gives the hand-built ids, metadata on the nodes, the model in the
    bucket, the error flag of a failed call hashed."""
    path = tmp_path / "session.json"
    path.write_text(json.dumps(SESSION))
    result = import_file(path)
    assert result.format == "gemini"
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert (result.messages, result.skipped) == (3, 0)
    first, asst, results, last = result.nodes
    assert first.metadata["session"] == {
        "sessionId": "s-1",
        "projectHash": "p" * 64,
        "startTime": "2026-01-01T00:00:00.000Z",
    }
    assert first.metadata["index"] == 0 and first.metadata["id"] == "m1"
    assert asst.bucket.model == "gemini-2.5-pro"
    assert asst.metadata["tokens"] == {"input": 10, "output": 2}
    assert "tokens" not in results.metadata and results.metadata["id"] == "m2"
    assert last.metadata == {"source": "gemini", "index": 2, "id": "m3", "timestamp": "t3"}


def test_jsonl_form_gives_the_same_ids(tmp_path: Path) -> None:
    """The JSONL form of the same session, with re-written messages, ``$set`` patches and
    notices, gives the same ids; the last copy of a message wins, at its first place."""
    path = tmp_path / "session.jsonl"
    path.write_text(lines_of(SESSION))
    result = import_file(path)
    assert result.format == "gemini"
    assert [n.hash for n in result.nodes] == reference_hashes()
    # 1 metadata line; per message an info line and a patch; per gemini message one more
    # patch and the first copy, superseded by the whole one.
    assert (result.messages, result.skipped) == (3, 11)
    assert dict(result.skip_reasons) == {
        "session metadata": 1,
        "superseded by a later copy": 2,
        "$set patch": 5,
        "info message": 3,
    }
    assert result.nodes[1].metadata["line"] == 5  # the first copy's line (lines 1-4 before)
    assert result.nodes[1].metadata["notes"] == [{"type": "info", "content": "Saved."}]


def test_object_and_jsonl_and_json_agree(tmp_path: Path) -> None:
    """``import_object`` of the parsed session gives the same nodes as its files."""
    by_object = import_object(SESSION)
    assert by_object.format == "gemini"
    assert [n.hash for n in by_object.nodes] == reference_hashes()
    assert import_object(SESSION, "gemini").nodes == by_object.nodes


def test_parts_content_function_calls_and_thought_parts() -> None:
    """Content as parts: thought parts are thinking, ``functionCall`` parts tool uses (a
    ``toolCalls`` entry with the same id adds no second one), images by data and by URL."""
    session = copy.deepcopy(SESSION)
    session["messages"] = [
        {
            "id": "u",
            "type": "user",
            "content": [
                {"text": "look"},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://b/x.jpg"}},
                {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
            ],
        },
        {
            "id": "g",
            "type": "gemini",
            "content": [
                {"text": "hmm", "thought": True},
                {"text": "ok"},
                {"functionCall": {"id": "c", "name": "ls", "args": {"p": "/"}}},
            ],
            "toolCalls": [{"id": "c", "name": "ls", "args": {"p": "/"}, "result": []}],
        },
    ]
    result = import_object(session)
    user, asst, results = result.nodes
    assert [b.to_dict() for b in user.bucket.content] == [
        _block("text", text="look"),
        _block("image", image_base64="AAAA", media_type="image/png"),
        _block("image", image_url="gs://b/x.jpg", media_type="image/jpeg"),
        _block("inline_data", content={"mimeType": "application/pdf", "data": "JVBE"}),
    ]
    assert [b.to_dict() for b in asst.bucket.content] == [
        _block("thinking", thinking="hmm"),
        _block("text", text="ok"),
        _block("tool_use", tool_use_id="c", tool_name="ls", tool_input={"p": "/"}),
    ]
    assert [b.to_dict() for b in results.bucket.content] == [
        _block("tool_result", tool_result_id="c")
    ]


def test_result_parts_other_values_and_pending_calls() -> None:
    """A result's text parts join its output; other parts and response keys go to
    ``content``; a call without a result adds no block (no results node at all)."""
    session = copy.deepcopy(SESSION)
    session["messages"] = [
        {"id": "u", "type": "user", "content": "go"},
        {
            "id": "g",
            "type": "gemini",
            "content": "",
            "toolCalls": [
                {
                    "id": "r",
                    "name": "read_many",
                    "result": [
                        {"functionResponse": {"id": "r", "response": {"output": "one", "n": 2}}},
                        {"text": "two"},
                        {"inlineData": {"mimeType": "image/png", "data": "QQ"}},
                    ],
                },
                {"id": "p", "name": "pending", "status": "executing"},
            ],
        },
        {"id": "h", "type": "gemini", "content": "", "toolCalls": [{"id": "q", "name": "x"}]},
    ]
    result = import_object(session)
    assert [n.bucket.role for n in result.nodes] == ["user", "assistant", "user", "assistant"]
    assert [b.to_dict() for b in result.nodes[2].bucket.content] == [
        _block(
            "tool_result",
            tool_result_id="r",
            tool_output="one\ntwo",
            content=[{"n": 2}, {"inlineData": {"mimeType": "image/png", "data": "QQ"}}],
        )
    ]


def test_notices_are_skipped_with_reasons_and_kept_as_notes() -> None:
    """info / error / warning messages are not nodes: counted with their reason and kept in
    the ``notes`` of the next node; they change no id."""
    noisy = copy.deepcopy(SESSION)
    noisy["messages"][1:1] = [
        {"id": "i", "type": "info", "content": "Loaded", "timestamp": "x"},
        {"id": "w", "type": "warning", "content": "Slow"},
        {"id": "e", "type": "error", "content": "Retrying"},
    ]
    result = import_object(noisy)
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert (result.messages, result.skipped) == (3, 3)
    assert dict(result.skip_reasons) == {
        "info message": 1,
        "warning message": 1,
        "error message": 1,
    }
    assert result.nodes[1].metadata["notes"] == [
        {"type": "info", "content": "Loaded", "timestamp": "x"},
        {"type": "warning", "content": "Slow"},
        {"type": "error", "content": "Retrying"},
    ]


def test_system_reminder_noise_changes_no_id() -> None:
    """Harness tags in user text and tool output are projected away: same ids."""
    noisy = copy.deepcopy(SESSION)
    noisy["messages"][0]["content"] = (
        "<system-reminder>Be careful.</system-reminder>What is in /tmp?"
    )
    response = noisy["messages"][1]["toolCalls"][0]["result"][0]["functionResponse"]
    response["response"]["output"] = "a\nb<system-reminder>x</system-reminder>"
    assert [n.hash for n in import_object(noisy).nodes] == reference_hashes()


def test_last_copy_wins_at_the_first_place(tmp_path: Path) -> None:
    """A message written again after later messages keeps its first place but its last
    content; the earlier copy is never hashed."""
    records = [
        {"sessionId": "s", "projectHash": "p"},
        {"id": "a", "type": "user", "content": "one"},
        {"id": "b", "type": "gemini", "content": "draft"},
        {"id": "c", "type": "user", "content": "two"},
        {"id": "b", "type": "gemini", "content": "final"},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = import_file(path)
    texts = [n.bucket.content[0].text for n in result.nodes]
    assert texts == ["one", "final", "two"]
    assert [n.metadata["line"] for n in result.nodes] == [2, 3, 4]


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.booleans(), st.booleans(), st.booleans())
def test_jsonl_noise_and_rewrites_never_change_ids(
    rng: Any, rewrites: bool, noise: bool, crlf: bool
) -> None:
    """Property: however the JSONL form re-writes messages, adds patches and notices, orders
    the keys of its records or ends its lines, the ids equal the JSON form's."""
    records = []
    for line in lines_of(SESSION, rewrites=rewrites, noise=noise).splitlines():
        record = json.loads(line)
        keys = list(record)
        rng.shuffle(keys)
        records.append(json.dumps({k: record[k] for k in keys}))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_bytes((("\r\n" if crlf else "\n").join(records) + "\n").encode())
        assert [n.hash for n in import_file(path).nodes] == reference_hashes()


def test_torn_last_line_is_skipped_a_bad_middle_line_refused(tmp_path: Path) -> None:
    """A cut last line is a session still being written (skipped); a bad line before the
    end is an error naming the file and line."""
    text = lines_of(SESSION, rewrites=False, noise=False)
    path = tmp_path / "s.jsonl"
    path.write_text(text + '{"id": "m4", "type": "us')
    result = import_file(path)
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert dict(result.skip_reasons) == {"session metadata": 1, "torn last line": 1}
    path.write_text(text.replace("\n", "\n{oops\n", 1))
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path)
    assert str(info.value).startswith(f"{path}:2: not a JSON line")
    assert info.value.line == 2


HOSTILE: list[tuple[Any, str]] = [
    ({"sessionId": "s", "messages": [{"id": "1", "type": "user", "content": 5}]},
     "gemini: messages[0]: content must be a string or a list of parts"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "user", "content": [7]}]},
     "gemini: messages[0]: a content part must be an object"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini", "toolCalls": {}}]},
     "gemini: messages[0]: 'toolCalls' must be a list"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini", "toolCalls": [1]}]},
     "gemini: messages[0]: a tool call must be an object"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini", "thoughts": "x"}]},
     "gemini: messages[0]: 'thoughts' must be a list"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini",
      "toolCalls": [{"id": 3}]}]},
     "gemini: messages[0]: 'id' must be a string"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini",
      "toolCalls": [{"id": "c", "result": [5]}]}]},
     "gemini: messages[0]: a result part must be an object"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "user",
      "content": [{"inlineData": 4}]}]},
     "gemini: messages[0]: 'inlineData' must be an object"),
    ({"sessionId": "s", "messages": [{"id": "1", "type": "gemini",
      "toolCalls": [{"id": "c", "args": {"x": float("nan")}}]}]},
     "gemini: messages[0]: JSON value: NaN or infinity is not a JSON number"),
    ({"sessionId": "s", "messages": [3]},
     "not a gemini session (messages[0] is not an object with a 'type')"),
    ({"messages": []}, "not a gemini session (no 'sessionId' or 'projectHash')"),
    ([], "not a gemini session (not a JSON object)"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message"), HOSTILE)
def test_hostile_sessions_are_clear_errors(tmp_path: Path, value: Any, message: str) -> None:
    """Malformed sessions: one TranscriptFormatError with a clear text (the file named when
    read from a file), never another exception; the CLI prints one error line, exit 1."""
    with pytest.raises(TranscriptFormatError) as info:
        import_object(value, "gemini")
    assert str(info.value) == message
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(value))
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path, "gemini")
    named = message.replace("not a gemini", f"{path} is not a gemini", 1)
    assert str(info.value) == (named if named != message else f"{path}: {message}")
    assert info.value.path == str(path)


def test_hostile_cli_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line reports a malformed session in one ``error:`` line, exit 1."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(HOSTILE[0][0]))
    code, out, err = run_main(capsys, "dag", "import", str(path), "--format", "gemini")
    assert (code, out) == (1, "")
    assert err == f"error: {path}: {HOSTILE[0][1]}\n"


def test_named_format_refuses_another_shape(tmp_path: Path) -> None:
    """``--format gemini`` on JSON lines that are not a session is refused by name."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(TranscriptFormatError) as info:
        import_file(path, "gemini")
    assert str(info.value) == (
        f"{path} is not a gemini session (no line is session metadata, a $set patch or a "
        "message with an id and a type)"
    )


def test_detection(tmp_path: Path) -> None:
    """Both forms are detected; a cut head of a big JSON session too; other formats not."""
    json_path = tmp_path / "s.json"
    json_path.write_text(json.dumps(SESSION))
    lines_path = tmp_path / "s.jsonl"
    lines_path.write_text(lines_of(SESSION))
    assert detect_format(json_path) == detect_format(lines_path) == "gemini"
    assert detect_format(SESSION) == "gemini"
    big = json.dumps(SESSION).encode()
    assert sniff(big[: len(big) // 2])
    assert not sniff(b'{"messages": [{"role": "user", "content": "hi"}]}')
    assert not sniff(b'{"type": "user", "uuid": "u", "parentUuid": null}\n')


def test_real_samples_details() -> None:
    """The two real sessions: the failed call of the JSON sample is an error result, and the
    JSONL sample keeps the last copy of each re-written message (its tool calls)."""
    result = import_file(shared_path("real_inputs", SAMPLE_JSON))
    errors = [b for n in result.nodes for b in n.bucket.content if b.is_error]
    assert [b.tool_result_id for b in errors] == ["replace-1761077322005-e180d6d44397f"]
    uses = [b for n in result.nodes for b in n.bucket.content if b.type == "tool_use"]
    assert len(uses) == 11
    result = import_file(shared_path("real_inputs", SAMPLE_LINES))
    uses = [b for n in result.nodes for b in n.bucket.content if b.type == "tool_use"]
    answered = [b for n in result.nodes for b in n.bucket.content if b.type == "tool_result"]
    assert len(uses) == len(answered) == 12
    assert {b.tool_use_id for b in uses} == {b.tool_result_id for b in answered}
