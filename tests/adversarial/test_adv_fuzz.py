"""Fuzzing with Hypothesis: only ``MerkleMemoryError`` subclasses may escape (issue 7), and
what is accepted has the properties it must have (issue 14).

Arbitrary bytes, and real transcripts with random byte edits, go into ``canonical.loads``,
every transcript importer (by name and ``auto``), the ledger reader (``verify_ledger``,
``Ledger.entries``, ``Ledger.append`` onto the bytes) and the record reader. Any other
exception (``KeyError``, ``TypeError``, ``UnicodeError``, ``RecursionError``,
``json.JSONDecodeError``, ...) is a fault. An import that succeeds must give nodes whose ids
recompute with ``node_hash``, whose parent links form a forest (every parent listed before its
children), and the same ids when imported again; generated sessions must keep their ids under
every change that touches no hashed content (metadata, key order, JSON spacing, harness tags,
lines that are not messages). ``EXAMPLES`` examples per target in CI; the soak
variant (``MERKLE_MEMORY_SOAK=1``) runs 20 times as many. The atheris targets in ``fuzz/``
do the same for long runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ledger_report, shared_path

from merkle_memory import canonical
from merkle_memory.dag import Forest, node_hash
from merkle_memory.errors import MerkleMemoryError
from merkle_memory.ledger import Ledger, verify_ledger
from merkle_memory.ledger.records import read_record
from merkle_memory.transcripts import FORMAT_NAMES, ImportResult, import_file

SOAK = os.environ.get("MERKLE_MEMORY_SOAK", "") not in ("", "0")
EXAMPLES = 150 * (40 if SOAK else 1)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=not SOAK,
)
WORK = Path(tempfile.mkdtemp(prefix="mm-fuzz-"))

# JSON-ish bytes: structural characters, escapes and number parts, so the parsers get past
# their first byte far more often than with uniform bytes.
_TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b"\\",
    b"\\u",
    b"d800",
    b"0",
    b"1",
    b"-",
    b"e",
    b".",
    b"400",
    b"9007199254740993",
    b"true",
    b"null",
    b"NaN",
    b"Infinity",
    b" ",
    b"\n",
    b"\xff",
    b"\xc3",
    b"\xef\xbb\xbf",
    b'"seq"',
    b'"type"',
    b'"role"',
    b'"content"',
    b'"message"',
    b'"user"',
    b'"text"',
    b'"tool_use"',
    b'"hash"',
    b'"id"',
    b'"messages"',
]
JSONISH = st.lists(st.sampled_from(_TOKENS) | st.binary(max_size=3), max_size=60).map(b"".join)
BYTES = st.binary(max_size=400) | JSONISH


def _only_library_errors(call: object) -> None:
    with contextlib.suppress(MerkleMemoryError):
        call()  # type: ignore[operator]


def _check_accepted(path: Path, format_name: str) -> None:
    """Import ``path``: a library error, or nodes with the properties every import has (ids
    recompute, parent links form a forest in parent-first order, a second import agrees)."""
    try:
        result = import_file(path, format_name)
    except MerkleMemoryError:
        return
    _assert_forest(result)
    again = import_file(path, format_name)
    assert [n.hash for n in again.nodes] == [n.hash for n in result.nodes]
    assert (again.messages, again.skipped) == (result.messages, result.skipped)


def _assert_forest(result: ImportResult) -> None:
    """Every id is ``node_hash(bucket, parent_hash)``, ids are distinct, every parent comes
    before its child (so the links form a forest: no cycle, no dangling parent), and the
    nodes join one ``Forest`` with that many roots."""
    seen: set[str] = set()
    for node in result.nodes:
        assert node.hash == node_hash(node.bucket, node.parent_hash)
        assert node.hash not in seen
        assert node.parent_hash is None or node.parent_hash in seen
        seen.add(node.hash)
    forest = Forest()
    for node in result.nodes:
        forest.add(node)
    assert forest.size() == len(result.nodes)
    assert len(forest.roots()) == sum(n.parent_hash is None for n in result.nodes)


@FUZZ
@given(BYTES)
def test_fuzz_canonical_loads(data: bytes) -> None:
    """``canonical.loads`` on any bytes: a value that round-trips, or a library error."""
    try:
        value = canonical.loads(data)
    except MerkleMemoryError:
        return
    out = canonical.dumps(value)
    assert canonical.dumps(canonical.loads(out)) == out


@FUZZ
@given(BYTES, st.sampled_from((*FORMAT_NAMES, "auto")))
def test_fuzz_importers_arbitrary_bytes(data: bytes, format_name: str) -> None:
    """Every importer (and ``auto``) on any bytes: a library error, or a well-formed forest."""
    path = WORK / "transcript.bin"
    path.write_bytes(data)
    _check_accepted(path, format_name)


_REAL: list[tuple[str, bytes]] = []


def _real_inputs() -> list[tuple[str, bytes]]:
    """The real transcripts of ``../shared/real_inputs`` (the test skips when absent)."""
    if not _REAL:
        folder = shared_path("real_inputs")
        suffixes = (".jsonl", ".json", ".af", ".md")
        _REAL.extend(
            sorted((p.name, p.read_bytes()) for p in folder.iterdir() if p.suffix in suffixes)
        )
    return _REAL


@FUZZ
@given(st.data())
def test_fuzz_importers_mutated_real_transcripts(data: st.DataObject) -> None:
    """Real transcripts with random byte substitutions, cuts and splices: only library errors,
    and what still imports is a well-formed forest that imports the same again."""
    name, original = data.draw(st.sampled_from(_real_inputs()))
    blob = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["sub", "cut", "dup", "token"]))
        pos = data.draw(st.integers(0, max(len(blob) - 1, 0)))
        if kind == "sub" and blob:
            blob[pos] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del blob[pos : pos + data.draw(st.integers(1, 64))]
        elif kind == "dup":
            blob[pos:pos] = blob[pos : pos + data.draw(st.integers(1, 64))]
        else:
            blob[pos:pos] = data.draw(st.sampled_from(_TOKENS))
    path = WORK / name
    path.write_bytes(bytes(blob))
    format_name = data.draw(st.sampled_from((*FORMAT_NAMES, "auto")))
    _check_accepted(path, format_name)


# --- generated Claude Code sessions: ids depend on hashed content only ---------------------------

_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_TURN = st.tuples(
    st.sampled_from(["user", "assistant", "call", "result"]),
    _WORDS.filter(lambda w: w.strip(" \t\n\r\v\f\x85\xa0") == w and "<" not in w),
    st.integers(0, 3),  # how many lines back the parent is (0: the line before; a branch else)
)
_NOISE = st.fixed_dictionaries(
    {
        "stamp": st.integers(0, 10**9),
        "session": st.text("abcdef0123456789", min_size=1, max_size=8),
        "model": st.sampled_from(["claude-opus-4-1", "claude-sonnet-4-5", "x"]),
        "sort_keys": st.booleans(),
        "spaced": st.booleans(),
        "reminder": st.booleans(),
        "padding": st.sampled_from(["", "\n", "  \n\n"]),
        "progress": st.booleans(),
    }
)


def _session_lines(turns: list[tuple[str, str, int]], noise: dict[str, Any]) -> list[Any]:
    """The lines of a session: every turn a message line (a ``call`` an assistant tool_use, a
    ``result`` a user tool_result), ``noise`` changing only what no node id covers."""
    lines: list[Any] = []
    uuids: list[str] = []  # of the message lines
    for index, (kind, word, back) in enumerate(turns):
        parent = uuids[max(len(uuids) - 1 - back, 0)] if uuids else None
        if parent is not None and noise["progress"]:
            parent = "p" + parent  # the progress line after that message
        uuid = f"u{index}"
        role = "assistant" if kind in ("assistant", "call") else "user"
        if kind == "call":
            content: Any = [
                {
                    "type": "tool_use",
                    "id": f"t{index}",
                    "name": "Bash",
                    "input": {"command": word, "dry_run": False},
                }
            ]
        elif kind == "result":
            content = [
                {
                    "type": "tool_result",
                    "tool_use_id": f"t{index - 1}",
                    "content": word + noise["padding"],
                }
            ]
        else:
            content = [{"type": "text", "text": noise["padding"] + word}]
            if noise["reminder"] and role == "user":
                content.append({"type": "text", "text": "<system-reminder>r</system-reminder>"})
        message = {"role": role, "content": content, "model": noise["model"]}
        if role == "assistant":
            message["id"] = f"msg{index}"
            message["usage"] = {"input_tokens": noise["stamp"] % 997}
        lines.append(
            {
                "type": role,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": noise["session"],
                "timestamp": str(noise["stamp"] + index),
                "message": message,
            }
        )
        uuids.append(uuid)
        if noise["progress"]:  # a non-message line in the chain: children link through it
            lines.append({"type": "progress", "uuid": "p" + uuid, "parentUuid": uuid})
    return lines  # fmt: skip


def _write_session(path: Path, lines: list[Any], noise: dict[str, Any]) -> Path:
    separators = (", ", ": ") if noise["spaced"] else (",", ":")
    dump = [json.dumps(x, separators=separators, sort_keys=noise["sort_keys"]) for x in lines]
    path.write_text("".join(d + "\n" for d in dump), encoding="utf-8")
    return path


_PLAIN_NOISE = {"stamp": 0, "session": "s", "model": "m", "sort_keys": False, "spaced": False,
                "reminder": False, "padding": "", "progress": False}  # fmt: skip


@FUZZ
@given(st.lists(_TURN, min_size=1, max_size=12), _NOISE)
def test_fuzz_ids_ignore_what_is_not_hashed(turns: list[tuple[str, str, int]], noise: Any) -> None:
    """A generated session and a copy changed only outside the hashed content (timestamps,
    session id, model, usage, key order, JSON spacing, whitespace the projection trims, a
    harness-tag block, progress lines linking through) give the same node ids, and both are
    well-formed forests."""
    plain = _write_session(WORK / "plain.jsonl", _session_lines(turns, _PLAIN_NOISE), _PLAIN_NOISE)
    noisy = _write_session(WORK / "noisy.jsonl", _session_lines(turns, noise), noise)
    first, second = import_file(plain), import_file(noisy)
    _assert_forest(first)
    _assert_forest(second)
    assert [n.hash for n in second.nodes] == [n.hash for n in first.nodes]
    assert [n.parent_hash for n in second.nodes] == [n.parent_hash for n in first.nodes]
    assert first.messages == second.messages == len(turns)


@FUZZ
@given(st.lists(BYTES, max_size=6), st.booleans())
def test_fuzz_ledger_reader(lines: list[bytes], with_head: bytes) -> None:
    """verify_ledger never raises on any file; entries/append raise only library errors."""
    folder = WORK / "ledger"
    folder.mkdir(exist_ok=True)
    for name in ("ledger.head", "ledger.torn"):
        (folder / name).unlink(missing_ok=True)
    path = folder / "ledger.jsonl"
    path.write_bytes(b"\n".join(lines))
    if with_head and lines:
        (folder / "ledger.head").write_bytes(lines[0][:80] + b"\n")
    report = verify_ledger(path, {"m1": "0" * 64})
    assert report.chain in ("intact", "broken", "empty")
    keys = set(ledger_report()) | ({"torn_tail"} if report.torn_tail is not None else set())
    assert set(report.to_dict()) == keys
    if report.torn_tail is not None:  # exactly the bytes after the last newline, not an entry
        offset, length = report.torn_tail
        data = path.read_bytes()
        assert offset == data.rfind(b"\n") + 1 and offset + length == len(data) and length > 0
    _only_library_errors(lambda: list(Ledger(path).entries(check_hash=True)))
    before = path.read_bytes()
    try:
        Ledger(path).append("m1", "0" * 64)
    except MerkleMemoryError:
        # Refused: only a torn tail may have been moved to ledger.torn; nothing else changed.
        after = path.read_bytes()
        assert before.startswith(after)
        moved = before[len(after) :]
        if moved:
            assert moved in (folder / "ledger.torn").read_bytes()
        return
    assert verify_ledger(path, {}).entries >= 1


@FUZZ
@given(BYTES)
def test_fuzz_record_reader(data: bytes) -> None:
    """``read_record`` on any bytes: a dict, or RecordError."""
    path = WORK / "record.json"
    path.write_bytes(data)
    try:
        value = read_record(path)
    except MerkleMemoryError:
        return
    assert type(value) is dict
