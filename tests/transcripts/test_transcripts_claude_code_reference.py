"""The Claude Code importer against a plain reference of itself (issue 15 item 4).

The importer groups lines in the lines' own slots, counts uuids while it reads, finds
surrogate escapes with a bytes pattern, and builds nodes from the values ``json.loads`` made
(checked, not copied). The reference below is the importer as it was before that work: one
object per group, uuids counted in a second pass, ``"\\\\ud"`` substring tests, every block
built by the checking, copying constructor, and every node's metadata copied. Both must give
the same nodes (ids, parents, buckets, metadata with its key order), counts, or the same
error text and line, for any file: Hypothesis writes sessions with repeated and missing
uuids, forward and unknown parents, merged assistant lines, result groups, harness noise,
lone surrogates, torn and broken lines.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merkle_memory.dag import Bucket, ContentBlock
from merkle_memory.errors import MerkleMemoryError, TranscriptFormatError
from merkle_memory.projection import normalize_whitespace, strip_tags
from merkle_memory.transcripts import claude_code, import_file
from merkle_memory.transcripts._blocks import anthropic_block, clean_surrogates
from merkle_memory.transcripts._common import ImportResult, RawMessage, build_result, not_json
from merkle_memory.transcripts._importer import Importer
from merkle_memory.transcripts._located import in_file, not_format

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_transcript import generate

# --- the reference: the importer before issue 15 item 4 ----------------------------------

_META_KEYS = (
    ("timestamp", "timestamp"),
    ("sessionId", "session_id"),
    ("isSidechain", "is_sidechain"),
    ("parent_tool_use_id", "parent_tool_use_id"),
    ("parentToolUseID", "parent_tool_use_id"),
)
_LINE_KEYS = ("uuid", "parentUuid", "type", *(key for key, _ in _META_KEYS))


def _only_results(blocks: list[ContentBlock]) -> bool:
    kept = False
    for block in blocks:
        if block.text and not normalize_whitespace(strip_tags(block.text)):
            continue
        if block.type != "tool_result":
            return False
        kept = True
    return kept


class _Line:
    def __init__(self, lineno: int, record: Mapping[str, Any], message: Mapping[str, Any]):
        self.lineno = lineno
        uuid, parent = record.get("uuid"), record.get("parentUuid")
        self.uuid = uuid if isinstance(uuid, str) else None
        self.parent_uuid = parent if isinstance(parent, str) else None
        role = message.get("role")
        self.role = role if isinstance(role, str) and role else str(record["type"])
        message_id = message.get("id")
        self.message_id = message_id if isinstance(message_id, str) else None
        content = message.get("content")
        if content is None:
            items: list[Any] = []
        elif isinstance(content, str):
            items = [content]
        elif isinstance(content, list):
            items = content
        else:
            raise TranscriptFormatError("message content must be a string or a list")
        self.blocks = [anthropic_block(item) for item in items]  # checked and copied
        if self.role == "assistant":
            self.kind = "assistant"
        elif _only_results(self.blocks):
            self.kind = "results"
        else:
            self.kind = "other"
        self.meta: dict[str, Any] = {}
        for source_key, meta_key in _META_KEYS:
            value = record.get(source_key)
            if isinstance(value, str | bool):
                self.meta[meta_key] = value
        if self.message_id is not None:
            self.meta["message_id"] = self.message_id
        model = message.get("model")
        if isinstance(model, str):
            self.meta["model"] = model
        self.group: _Group | None = None


class _Group:
    def __init__(self, line: _Line, answers: frozenset[str] | None) -> None:
        self.lines = [line]
        self.answers = answers
        self.result_ids: set[str] | None = None
        if line.kind == "results":
            self.result_ids = {b.tool_result_id for b in line.blocks if b.tool_result_id}
        line.group = self

    def add(self, line: _Line) -> None:
        self.lines.append(line)
        if self.result_ids is not None:
            self.result_ids.update(b.tool_result_id for b in line.blocks if b.tool_result_id)
        line.group = self

    def tool_use_ids(self) -> frozenset[str]:
        return frozenset(b.tool_use_id for x in self.lines for b in x.blocks if b.tool_use_id)


Entry = _Line | tuple[str, str | None]


def _parse_lines(path: Path) -> tuple[list[Entry], int, int]:
    entries: list[Entry] = []
    messages = skipped = objects = 0
    signed = False
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
                record = json.loads(text)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                if not raw.endswith(b"\n"):
                    skipped += 1
                    continue
                error = TranscriptFormatError(not_json(exc, "not a JSON line"))
                raise in_file(path, error, lineno) from exc
            if not isinstance(record, dict):
                raise in_file(path, TranscriptFormatError("not a JSON object"), lineno)
            objects += 1
            signed = (
                signed
                or "parentUuid" in record
                or (record.get("type") == "summary" and "leafUuid" in record)
            )
            message = record.get("message")
            if record.get("type") in ("user", "assistant") and isinstance(message, dict):
                if "\\ud" in text or "\\uD" in text:
                    message = clean_surrogates(message)
                    record = clean_surrogates({k: record[k] for k in _LINE_KEYS if k in record})
                try:
                    entries.append(_Line(lineno, record, message))
                except MerkleMemoryError as exc:
                    raise in_file(path, exc, lineno) from exc
                messages += 1
                continue
            skipped += 1
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                parent = record.get("parentUuid")
                entries.append((uuid, parent if isinstance(parent, str) else None))
    if objects and not signed:
        raise not_format(
            "a claude-code session",
            "no line has a 'parentUuid' key or is a 'summary' with a 'leafUuid'",
            path,
        )
    return entries, messages, skipped


def _key(line: _Line) -> str:
    return line.uuid if line.uuid is not None else f"#line{line.lineno}"


def _records(entries: list[Entry]) -> Iterator[RawMessage]:
    counts: dict[str, int] = {}
    for entry in entries:
        uuid = entry.uuid if isinstance(entry, _Line) else entry[0]
        if uuid is not None:
            counts[uuid] = counts.get(uuid, 0) + 1
    unique = {e.uuid: e for e in entries if isinstance(e, _Line) and e.uuid and counts[e.uuid] == 1}
    for entry in entries:
        if not isinstance(entry, _Line):
            continue
        parent = unique.get(entry.parent_uuid or "")
        tail = parent is not None and parent.group is not None and parent.group.lines[-1] is parent
        group = parent.group if parent is not None and tail else None
        if group is not None and entry.uuid in unique:
            first = group.lines[0]
            if (
                entry.kind == "assistant"
                and first.kind == "assistant"
                and entry.message_id is not None
                and entry.message_id == first.message_id
            ):
                group.add(entry)
                continue
            ids = {b.tool_result_id for b in entry.blocks if b.type == "tool_result"}
            if (
                entry.kind == "results"
                and first.kind == "results"
                and group.answers is not None
                and group.result_ids is not None
                and ids <= group.answers
                and not ids & group.result_ids
            ):
                group.add(entry)
                continue
        answers = None
        if entry.kind == "results" and group is not None and group.lines[0].kind == "assistant":
            answers = group.tool_use_ids()
        _Group(entry, answers)
    redirect: dict[str, str] = {}
    for uuid, line in unique.items():
        assert line.group is not None
        if line.group.lines[0] is not line:
            redirect[uuid] = _key(line.group.lines[0])
    for entry in entries:
        if not isinstance(entry, _Line):
            uuid, parent = entry
            yield RawMessage(uuid, None if parent is None else redirect.get(parent, parent), None)
            continue
        assert entry.group is not None
        lines = entry.group.lines
        if lines[0] is not entry:
            continue
        metadata: dict[str, Any] = {"source": "claude-code"}
        for line in lines:
            for name, value in line.meta.items():
                metadata.setdefault(name, value)
        metadata["uuids"] = [line.uuid for line in lines if line.uuid is not None]
        metadata["lines"] = [line.lineno for line in lines]
        model = metadata.get("model")
        bucket = Bucket(
            "message",
            entry.role,
            tuple(b for line in lines for b in line.blocks),
            model=model if isinstance(model, str) else None,
            agent_name="claude-code",
        )
        parent = entry.parent_uuid
        parent_key = None if parent is None else redirect.get(parent, parent)
        yield RawMessage(_key(entry), parent_key, bucket, metadata)


def _read_reference(path: Path, progress: object = None) -> ImportResult:
    del progress  # the Importer passes one; the reference reports none
    entries, messages, skipped = _parse_lines(path)
    return build_result("claude-code", _records(entries), messages, skipped, path=str(path))


REFERENCE = Importer("claude-code", _read_reference, claude_code.sniff)


# --- sessions written by Hypothesis -----------------------------------------------------

_TEXTS = st.sampled_from(
    [
        "hello",
        "<system-reminder>noise</system-reminder>",
        "<system-reminder>noise</system-reminder>\\nkept",
        "  a \\t\\n\\n\\nb  ",
        "",
        "caf\\u00e9 \\ud83d\\ude00",
        "lone \\ud800 half",
        "\\\\ud800 is no escape",
    ]
)
_IDS = st.sampled_from(["t1", "t2", "t3"])


def _json_text(raw: str) -> str:
    """A JSON string literal whose content is ``raw``, already escaped JSON text."""
    return '"' + raw + '"'


def _rare(draw: st.DrawFn, n: int) -> bool:
    """True about once in ``n + 1`` draws (a middle value: Hypothesis favours the ends)."""
    return bool(draw(st.integers(0, n)) == n // 2)


@st.composite
def _block(draw: st.DrawFn, role: str) -> str:
    kinds = ["text", "tool_use", "thinking"] if role == "assistant" else ["text", "tool_result"]
    kind = draw(st.sampled_from([*kinds, *kinds, "tool_result", "other"]))
    if _rare(draw, 80):
        kind = "bad"
    text = _json_text(draw(_TEXTS))
    if kind == "text":
        return f'{{"type":"text","text":{text}}}'
    if kind == "tool_use":
        args = draw(st.sampled_from(['{"a":1,"b":false}', '{"x":' + text + "}", "{}", '"s"']))
        return f'{{"type":"tool_use","id":"{draw(_IDS)}","name":"Bash","input":{args}}}'
    if kind == "tool_result":
        content = draw(st.sampled_from([text, f'[{{"type":"text","text":{text}}},{{"n":2}}]']))
        return f'{{"type":"tool_result","tool_use_id":"{draw(_IDS)}","content":{content}}}'
    if kind == "thinking":
        return f'{{"type":"thinking","thinking":{text},"signature":"sig"}}'
    if kind == "other":
        return f'{{"type":"server_tool_result","tool_use_id":"t1","content":{text}}}'
    return draw(st.sampled_from(["1", '{"text":"no type"}', '{"type":"text","text":3}']))


@st.composite
def _line(
    draw: st.DrawFn,
    index: int,
    kind: str | None = None,
    message_id: str | None = None,
    content: str | None = None,
    fork: bool = False,
) -> str:
    """Line ``index`` of a session: mostly a message line named ``u<index>`` whose parent is
    the line before, with every kind of exception now and then. ``message_id`` and
    ``content``, when given, are the message's (JSON text); ``fork``: the parent is the line
    two before (inside a group the line before may have joined)."""
    if _rare(draw, 150):
        return draw(st.sampled_from(["not json", "[1,2]"]))
    if _rare(draw, 30):
        return draw(st.sampled_from(["", "   ", '{"type":"user"}']))
    if kind is None:
        kind = draw(st.sampled_from(["user", "assistant", "user", "system", "summary"]))
    fields: dict[str, str] = {}
    uuid_pick = draw(st.sampled_from(range(24)))
    uuid = {0: None, 1: "u0", 2: "", 3: f"u{max(index - 2, 0)}"}.get(uuid_pick, f"u{index}")
    if uuid is not None:
        fields["uuid"] = json.dumps(uuid)
    parent_pick = draw(st.sampled_from(range(30)))
    parent = {
        0: None,
        1: "unknown",
        2: f"u{index + 2}",  # a forward reference
        3: f"u{max(index - 3, 0)}",  # a rewind
        4: f"u{index}",  # itself
        5: f"u{max(index - 2, 0)}",  # a fork from inside a merged group
        6: f"u{max(index - 2, 0)}",
    }.get(parent_pick, f"u{index - 1}")
    if fork:
        parent = f"u{max(index - 2, 0)}"
    if kind != "summary" or draw(st.booleans()):
        fields["parentUuid"] = "null" if parent is None or index == 0 else json.dumps(parent)
    fields["type"] = json.dumps(kind)
    if kind == "summary":
        fields["leafUuid"] = json.dumps(f"u{index}")
    for key in ("timestamp", "sessionId", "isSidechain", "parent_tool_use_id", "parentToolUseID"):
        if _rare(draw, 4):
            fields[key] = draw(st.sampled_from(['"s"', "true", "7", '"p\\ud800"', "null"]))
    if kind in ("user", "assistant"):
        message: dict[str, str] = {}
        role = draw(st.sampled_from([kind, kind, kind, "", "tool", None]))
        if role is not None:
            message["role"] = json.dumps(role)
        if message_id is not None:
            message["id"] = message_id
        elif not _rare(draw, 4):
            message["id"] = json.dumps(draw(st.sampled_from(["m1", "m1", "m2"])))
        if draw(st.booleans()):
            message["model"] = '"claude"'
        shape = draw(st.sampled_from(range(80)))
        if content is not None:
            message["content"] = content
        elif shape < 6:
            message["content"] = _json_text(draw(_TEXTS))
        elif shape == 6:
            message["content"] = "null"
        elif shape == 7:
            message["content"] = "7"
        else:
            blocks = draw(st.lists(_block(kind), min_size=1, max_size=3))
            message["content"] = "[" + ",".join(blocks) + "]"
        fields["message"] = "{" + ",".join(f'"{k}":{v}' for k, v in message.items()) + "}"
    return "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"


@st.composite
def _session(draw: st.DrawFn) -> list[str]:
    """Up to 14 lines; after an assistant line, often more lines of its message or tool
    results answering its calls (what the importer merges)."""
    lines: list[str] = []
    follow: str | None = None
    message_id = '"m1"'
    tools = answered = 0
    for index in range(draw(st.integers(0, 14))):
        step = draw(st.sampled_from(["free", "free", "continue", "continue", "result", "result"]))
        if follow == "assistant" and step == "continue":
            tools += 1
            call = f'{{"type":"tool_use","id":"t{tools}","name":"Bash","input":{{"a":1}}}}'
            fork = _rare(draw, 6)
            lines.append(draw(_line(index, "assistant", message_id, f"[{call}]", fork)))
        elif follow is not None and step == "result" and tools:
            answer = answered % tools + 1 if draw(st.integers(0, 5)) else draw(st.integers(1, 3))
            answered += 1
            extra = ',{"type":"text","text":"<system-reminder>x</system-reminder>"}'
            result = f'{{"type":"tool_result","tool_use_id":"t{answer}","content":"ok"}}'
            content = f"[{result}{extra if _rare(draw, 3) else ''}]"
            lines.append(draw(_line(index, "user", content=content, fork=_rare(draw, 6))))
            follow = "user"
        else:
            kind = draw(st.sampled_from(["user", "assistant", "user", "system", "summary"]))
            if kind == "assistant":
                tools = answered = 0
                message_id = draw(st.sampled_from(['"m1"', '"m2"', '"m3"']))
            lines.append(draw(_line(index, kind, message_id if kind == "assistant" else None)))
            follow = kind if kind in ("user", "assistant") else None
    return lines


def _outcome(read: Any, path: Path) -> tuple[Any, ...]:
    try:
        result = read(path)
    except TranscriptFormatError as exc:
        return ("error", str(exc), exc.line)
    return (
        [
            (n.hash, n.parent_hash, n.bucket.to_dict(), list(n.metadata.items()))
            for n in result.nodes
        ],
        result.messages,
        result.skipped,
        result.dropped,
        result.duplicates,
        result.detached,
    )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=_session(), torn=st.booleans())
def test_importer_equals_reference(tmp_path: Path, lines: list[str], torn: bool) -> None:
    """Any session: the same nodes (ids, parents, buckets, metadata in order) and counts as
    the reference importer, or the same error text and line."""
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + ("" if torn else "\n"), encoding="utf-8")
    ours = _outcome(lambda p: import_file(p, "claude-code"), path)
    assert ours == _outcome(REFERENCE.read_file, path)


def test_generated_sessions_equal_reference(tmp_path: Path) -> None:
    """Generated sessions of both content profiles import to the reference's nodes."""
    for content in ("small", "realistic"):
        path = tmp_path / f"{content}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            generate(handle, 600, seed=11, content=content)
        ours = _outcome(lambda p: import_file(p, "claude-code"), path)
        assert ours[0] and ours[0] != "error"
        assert ours == _outcome(REFERENCE.read_file, path)


def _session_file(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _msg(uuid: str | None, parent: str | None, role: str, content: Any, mid: str = "m1") -> Any:
    line: dict[str, Any] = {"parentUuid": parent, "type": role, "sessionId": "s"}
    if uuid is not None:
        line["uuid"] = uuid
    line["message"] = {"role": role, "id": mid, "content": content}
    return line


def _use(tool: str) -> list[Any]:
    return [{"type": "tool_use", "id": tool, "name": "Bash", "input": {"n": 1}}]


def _answer(tool: str) -> list[Any]:
    return [{"type": "tool_result", "tool_use_id": tool, "content": "ok"}]


_EDGE_SESSIONS = {
    "fork inside a merged message": [
        _msg("u0", None, "user", "hi"),
        _msg("u1", "u0", "assistant", "a"),
        _msg("u2", "u1", "assistant", _use("t1")),
        _msg("u3", "u1", "assistant", "fork"),
    ],
    "results of two calls, then a fork inside them": [
        _msg("u0", None, "user", "hi"),
        _msg("u1", "u0", "assistant", _use("t1")),
        _msg("u2", "u1", "assistant", _use("t2")),
        _msg("u3", "u2", "user", _answer("t1")),
        _msg("u4", "u3", "user", _answer("t2")),
        _msg("u5", "u3", "user", _answer("t2")),
    ],
    "a result answered twice, in two and in three lines": [
        _msg("u0", None, "user", "hi"),
        _msg("u1", "u0", "assistant", _use("t1")),
        _msg("u2", "u1", "assistant", _use("t2")),
        _msg("u3", "u2", "user", _answer("t1")),
        _msg("u4", "u3", "user", _answer("t1")),
        _msg("u5", "u4", "user", "next"),
        _msg("u6", "u5", "assistant", _use("t3"), "m2"),
        _msg("u7", "u6", "assistant", _use("t4"), "m2"),
        _msg("u8", "u7", "user", _answer("t3")),
        _msg("u9", "u8", "user", _answer("t4")),
        _msg("u10", "u9", "user", _answer("t4")),
        _msg("u11", "u10", "assistant", _use("t5"), "m3"),
        _msg("u12", "u11", "user", _answer("t5")),
        _msg("u13", "u12", "user", _answer("t9")),  # no call of that turn
    ],
    "a repeated uuid never merges": [
        _msg("u0", None, "user", "hi"),
        _msg("u1", "u0", "assistant", "a"),
        _msg("u2", "u1", "assistant", "b"),
        {"type": "system", "uuid": "u2", "parentUuid": "u1"},
        _msg("u3", "u2", "assistant", "c"),
    ],
    "link-only lines and forward references": [
        _msg("u3", "u9", "user", "waits"),
        {"type": "system", "uuid": "u9", "parentUuid": "u1"},
        _msg("u0", None, "user", "hi"),
        _msg("u1", "u0", "assistant", "a"),
        _msg(None, "u1", "assistant", "no uuid"),
        _msg("u4", "nowhere", "user", "unknown parent"),
    ],
}


def test_edge_sessions_equal_reference(tmp_path: Path) -> None:
    """Hand-written sessions at the grouping rules' edges: forks from inside a merged group,
    result groups, repeated uuids, link-only lines, forward and unknown parents."""
    for name, lines in _EDGE_SESSIONS.items():
        path = _session_file(tmp_path / "edge.jsonl", lines)
        ours = _outcome(lambda p: import_file(p, "claude-code"), path)
        assert ours[0] != "error", name
        assert ours == _outcome(REFERENCE.read_file, path), name


_LINE = '{"parentUuid":null,"uuid":"u0","type":"user","message":{"role":"user","content":"hi"}}'


def test_line_framing_equals_reference(tmp_path: Path) -> None:
    """Lines the importer's direct scan leaves to ``json.loads``: leading and trailing
    spaces, CRLF, a byte-order mark, trailing data, two values, a bare value, and a torn or
    unterminated last line; the same nodes or the same error text and line."""
    variants = [
        " " + _LINE,
        _LINE + "  ",
        _LINE + "\r",
        "\ufeff" + _LINE,
        _LINE + " x",
        _LINE + _LINE,
        _LINE + "\t\r",
        "7",
        '"text"',
        _LINE[:-1],
    ]
    for variant in variants:
        for ending in ("\n", ""):
            path = tmp_path / "framing.jsonl"
            path.write_bytes((_LINE + "\n" + variant + ending).encode("utf-8"))
            ours = _outcome(lambda p: import_file(p, "claude-code"), path)
            assert ours == _outcome(REFERENCE.read_file, path), (variant, ending)
