"""``sync_paths`` (``dag sync``): incremental import from the open tail, the raw archive,
provisional nodes, rewrites, what is read and what is only stat'ed.

The reference everywhere is a one-shot import: after any sequence of syncs of growing files,
the store must hold exactly the rows (hash, parent, bucket, metadata) that one sync of the
final files into an empty store gives, and that ``import_file`` gives for each file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import ArchiveTarget
from support import cc_line, shared_path

from merkle_memory.dag import open_store
from merkle_memory.dag.store import ArchiveStore, SQLiteNodeStore
from merkle_memory.errors import NodeStoreError, TranscriptFormatError
from merkle_memory.transcripts import CHUNK_SIZE, import_file, sync_paths
from merkle_memory.transcripts import _sync as sync_module

Row = tuple[str, str | None, str, str]


def rows(db: Path) -> list[Row]:
    """Every stored node as (hash, parent, bucket JSON, metadata JSON), sorted."""
    con = sqlite3.connect(db)
    try:
        found = con.execute("SELECT hash, parent_hash, bucket, metadata FROM nodes").fetchall()
    finally:
        con.close()
    return sorted(found)


def store(db: Path) -> SQLiteNodeStore:
    opened = open_store(db)
    assert isinstance(opened, SQLiteNodeStore)
    return opened


def sync(db: Path, *paths: Path) -> Any:
    with store(db) as opened:
        return sync_paths(list(paths), opened)  # type: ignore[arg-type]


def one_shot(tmp_path: Path, *paths: Path) -> list[Row]:
    """The rows of one sync of ``paths`` into an empty store."""
    db = Path(tempfile.mkdtemp(dir=tmp_path)) / "reference.db"
    sync(db, *paths)
    return rows(db)


def assistant_part(uuid: str, parent: str, block: dict[str, Any], message_id: str) -> str:
    """One line of an assistant message written over several lines (one ``message.id``)."""
    line = json.loads(cc_line(uuid, parent, "assistant", [block]))
    line["message"]["id"] = message_id
    return json.dumps(line)


def claude_session() -> list[str]:
    """A Claude Code session with what makes grouping hard: an assistant message over three
    lines, parallel calls answered by two result lines with a link-only line between, a
    reminder-only line (not a node), a fork, and lines after it."""
    call = [
        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "t2", "name": "Read", "input": {"path": "b"}},
    ]
    lines = [
        cc_line("u1", None, "user", "Read a and b"),
        assistant_part("a1", "u1", {"type": "thinking", "thinking": "both"}, "m-a"),
        assistant_part("a2", "a1", call[0], "m-a"),
        assistant_part("a3", "a2", call[1], "m-a"),
        cc_line("r1", "a3", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "A"}]),
        json.dumps({"type": "system", "uuid": "s1", "parentUuid": "r1", "content": "hook ran"}),
        cc_line("r2", "s1", "user", [{"type": "tool_result", "tool_use_id": "t2", "content": "B"}]),
        cc_line("a4", "r2", "assistant", "Both read."),
        cc_line("n1", "a4", "user", "<system-reminder>only noise</system-reminder>"),
        cc_line("u2", "n1", "user", "Now write c"),
        cc_line("a5", "u2", "assistant", "Which content?"),
        cc_line("u3", "a4", "user", "Actually, delete a"),  # a fork from a4
        cc_line(
            "a6",
            "u3",
            "assistant",
            [{"type": "tool_use", "id": "t3", "name": "Rm", "input": {"path": "a"}}],
        ),
        cc_line("r3", "a6", "user", [{"type": "tool_result", "tool_use_id": "t3", "content": ""}]),
        cc_line("a7", "r3", "assistant", "Deleted."),
    ]
    return [line + "\n" for line in lines]


def codex_rollout() -> list[str]:
    """A Codex rollout: session meta, turn contexts, reasoning + calls, outputs."""

    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "t", "type": "response_item", "payload": payload}

    def msg(role: str, text: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    records = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}},
        item({"type": "message", "role": "developer",
              "content": [{"type": "input_text", "text": "be careful"}]}),
        {"timestamp": "t", "type": "turn_context", "payload": {"model": "gpt-5"}},
        msg("user", "list files"),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "ls"}]}),
        item({"type": "function_call", "name": "sh", "arguments": '{"cmd":"ls"}', "call_id": "c1"}),
        {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count"}},
        item({"type": "function_call_output", "call_id": "c1", "output": "a b"}),
        item({"type": "function_call", "name": "sh", "arguments": '{"cmd":"wc"}', "call_id": "c2"}),
        item({"type": "function_call_output", "call_id": "c2", "output": "2"}),
        msg("assistant", "two files"),
        {"timestamp": "t", "type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        msg("user", "thanks"),
        msg("assistant", "welcome"),
    ]  # fmt: skip
    return [json.dumps(r) + "\n" for r in records]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_new_files_then_unchanged(tmp_path: Path) -> None:
    """A first sync archives and imports every transcript once (an unknown file is skipped
    with its reason, a file named twice counts once); a second one adds nothing."""
    folder = tmp_path / "t"
    folder.mkdir()
    write(folder / "cc.jsonl", claude_session())
    write(folder / "rollout.jsonl", codex_rollout())
    (folder / "notes.txt").write_text("not a transcript")
    db = tmp_path / "s.db"
    expected = len(import_file(folder / "cc.jsonl").nodes) + len(
        import_file(folder / "rollout.jsonl").nodes
    )
    report = sync(db, folder, folder / "cc.jsonl")  # a file named twice is synced once
    assert report.to_dict() == {
        "files": 3,
        "new_files": 2,
        "updated_files": 0,
        "skipped": 1,
        "new_nodes": expected,
        "nodes": expected,
    }
    assert report.skipped_files == ((str(folder / "notes.txt"), "no known transcript format"),)
    with store(db) as opened:
        assert (
            b"".join(opened.archived_bytes(str(folder / "cc.jsonl")))
            == "".join(claude_session()).encode()
        )
    assert sync(db, folder).to_dict() == {
        "files": 3,
        "new_files": 0,
        "updated_files": 0,
        "skipped": 1,
        "new_nodes": 0,
        "nodes": expected,
    }


def test_unchanged_files_are_only_stated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync over files whose device, inode, size and mtime the store remembers opens none
    of them (the reader is never called); a touched file is read, found equal, not counted."""
    folder = tmp_path / "t"
    folder.mkdir()
    for index in range(20):
        write(folder / f"s{index}.jsonl", claude_session())
    db = tmp_path / "s.db"
    sync(db, folder)
    reads: list[str] = []
    original = sync_module._read

    def counting(path: str, prefix: int, start: int) -> Any:
        reads.append(path)
        return original(path, prefix, start)

    monkeypatch.setattr(sync_module, "_read", counting)
    assert sync(db, folder).to_dict()["updated_files"] == 0
    assert reads == []
    before = rows(db)
    os.utime(folder / "s3.jsonl", ns=(1, 1))
    report = sync(db, folder)
    assert (report.updated_files, report.new_nodes) == (0, 0)
    assert reads == [str(folder / "s3.jsonl")]
    assert rows(db) == before  # its open tail is kept: nothing was parsed
    reads.clear()
    sync(db, folder)
    assert reads == []  # the new mtime was remembered


@pytest.mark.parametrize("maker", [claude_session, codex_rollout], ids=["claude-code", "codex"])
def test_every_line_split_equals_one_shot(tmp_path: Path, maker: Any) -> None:
    """For every line where a session can be cut, syncing the first part, then the rest in
    two appends, leaves exactly the rows of a one-shot import of the whole file."""
    lines = maker()
    path = tmp_path / "t" / "session.jsonl"
    path.parent.mkdir()
    write(path, lines)
    want = one_shot(tmp_path, path)
    for cut in range(1, len(lines)):
        db = tmp_path / f"cut{cut}.db"
        middle = cut + (len(lines) - cut) // 2
        for end in (cut, middle, len(lines)):
            write(path, lines[:end])
            sync(db, path)
        assert rows(db) == want, cut


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_byte_splits_equal_one_shot(data: st.DataObject) -> None:
    """Property: a session written in any number of pieces cut at any byte (a line cut in
    half is a torn last line until it is complete) and synced after each piece gives the
    rows of a one-shot import."""
    maker = data.draw(st.sampled_from([claude_session, codex_rollout]))
    blob = "".join(maker()).encode()
    cuts = sorted(data.draw(st.lists(st.integers(1, len(blob) - 1), max_size=5, unique=True)))
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        path = base / "t" / "session.jsonl"
        path.parent.mkdir()
        path.write_bytes(blob)
        want = one_shot(base, path)
        db = base / "s.db"
        for end in [*cuts, len(blob)]:
            path.write_bytes(blob[:end])
            sync(db, path)
        assert rows(db) == want


def test_append_adds_only_the_new_nodes(tmp_path: Path) -> None:
    """Appending the second half of a session: the sync counts it updated, adds the nodes a
    one-shot import of the whole file has and the half had not, and drops the half's open
    tail that the whole no longer has (its last message grew)."""
    lines = claude_session()
    path = tmp_path / "t" / "cc.jsonl"
    path.parent.mkdir()
    half = 3  # ends inside the assistant message of lines 2-4: its node will grow
    write(path, lines[:half])
    db = tmp_path / "s.db"
    first = sync(db, path)
    half_nodes = {r[0] for r in rows(db)}
    write(path, lines)
    report = sync(db, path)
    whole = {n.hash for n in import_file(path).nodes}
    assert (report.new_files, report.updated_files) == (0, 1)
    assert report.new_nodes == len(whole - half_nodes)
    assert {r[0] for r in rows(db)} == whole
    assert report.nodes == len(whole) == first.nodes - len(half_nodes - whole) + report.new_nodes


def test_rewritten_file_is_a_new_version(tmp_path: Path) -> None:
    """A file whose consumed prefix changed is archived as version 2 and read again from its
    start; every node of the first version stays (its open tail included), the store holds
    exactly the union of one-shot imports of both versions, both restore byte for byte."""
    path = tmp_path / "t" / "rollout.jsonl"
    path.parent.mkdir()
    old = codex_rollout()
    write(path, old)
    db = tmp_path / "s.db"
    sync(db, path)
    old_nodes = {n.hash for n in import_file(path).nodes}
    new = [line.replace("list files", "list all files") for line in old]
    write(path, new)
    report = sync(db, path)
    assert (report.updated_files, report.new_files) == (1, 0)
    new_nodes = {n.hash for n in import_file(path).nodes}
    stored = {r[0] for r in rows(db)}
    assert stored == old_nodes | new_nodes
    assert import_file_last(old, tmp_path) in stored - new_nodes  # v1's open tail stays
    with store(db) as opened:
        files = opened.archived_files()
        assert [(f.version, f.versions, f.size) for f in files] == [(2, 2, path.stat().st_size)]
        assert b"".join(opened.archived_bytes(str(path))) == "".join(new).encode()
        assert b"".join(opened.archived_bytes(str(path), 1)) == "".join(old).encode()
        with pytest.raises(NodeStoreError, match="no version 3"):
            b"".join(opened.archived_bytes(str(path), 3))


def import_file_last(lines: list[str], tmp_path: Path) -> str:
    """The last node of a one-shot import of ``lines``."""
    other = Path(tempfile.mkdtemp(dir=tmp_path)) / "x.jsonl"
    write(other, lines)
    return import_file(other).nodes[-1].hash


def test_archive_chunks_and_shares_equal_bytes(tmp_path: Path) -> None:
    """Bytes are stored in chunks cut at multiples of CHUNK_SIZE (appends continue to the next
    multiple); two files with equal bytes share their chunks; restore is byte-exact."""
    line = cc_line("u1", None, "user", "x" * 1000) + "\n"
    big = line + "".join(
        cc_line(f"a{i}", "u1" if i == 0 else f"a{i - 1}", "assistant", "y" * 2000) + "\n"
        for i in range(300)
    )
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "one.jsonl").write_text(big)
    (folder / "two.jsonl").write_text(big)
    db = tmp_path / "s.db"
    sync(db, folder)
    con = sqlite3.connect(db)
    size = len(big.encode())
    chunks = -(-size // CHUNK_SIZE)
    assert con.execute("SELECT count(*) FROM chunks").fetchone()[0] == chunks
    assert con.execute("SELECT count(*) FROM file_chunks").fetchone()[0] == 2 * chunks
    with (folder / "one.jsonl").open("a") as handle:
        handle.write(cc_line("z", "a299", "user", "more") + "\n")
    sync(db, folder)
    offsets = [r[0] for r in con.execute(
        "SELECT offset FROM file_chunks WHERE file_id = 1 ORDER BY seq")]  # fmt: skip
    con.close()
    assert offsets == [i * CHUNK_SIZE for i in range(chunks)] + [size]
    with store(db) as opened:
        restored = b"".join(opened.archived_bytes(str(folder / "one.jsonl")))
    assert restored == (folder / "one.jsonl").read_bytes()


def test_provisional_nodes_held_by_another_file_or_an_import_stay(tmp_path: Path) -> None:
    """A copy of a partial session in another folder, or a ``put`` of its nodes, keeps the
    partial last node when the original grows past it."""
    lines = claude_session()
    folder = tmp_path / "t"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    write(folder / "a" / "s.jsonl", lines[:3])
    write(folder / "b" / "s.jsonl", lines[:3])
    db = tmp_path / "s.db"
    sync(db, folder)
    partial = import_file(folder / "a" / "s.jsonl").nodes[-1].hash
    write(folder / "a" / "s.jsonl", lines)
    sync(db, folder)
    assert partial in {r[0] for r in rows(db)}  # b's open tail holds it
    write(folder / "b" / "s.jsonl", lines)
    sync(db, folder)
    assert partial not in {r[0] for r in rows(db)}  # nothing holds it any more
    assert rows(db) == one_shot(tmp_path, folder)
    other = tmp_path / "u"
    other.mkdir()
    write(other / "s.jsonl", lines[:3])
    sync(db, other)
    with store(db) as opened:
        opened.put_many(import_file(other / "s.jsonl").nodes)  # an import makes them permanent
    write(other / "s.jsonl", lines)
    sync(db, other)
    assert partial in {r[0] for r in rows(db)}


def test_a_failed_import_keeps_the_bytes_and_retries(tmp_path: Path) -> None:
    """A transcript that does not parse is archived anyway and reported as failed; once
    fixed, it is imported whole."""
    lines = claude_session()
    path = tmp_path / "t" / "cc.jsonl"
    path.parent.mkdir()
    write(path, [*lines[:3], "{oops\n", *lines[3:]])
    db = tmp_path / "s.db"
    report = sync(db, path)
    assert (report.new_files, report.new_nodes) == (1, 0)
    reason = (
        f"{path}:4: not a JSON line (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))"
    )
    assert report.failed == ((str(path), reason),)
    with store(db) as opened:
        assert opened.archived_files()[0].error == report.failed[0][1]
    write(path, lines)
    report = sync(db, path)
    assert (report.updated_files, report.failed) == (1, ())
    assert rows(db) == one_shot(tmp_path, path)


def test_links_fifos_and_the_store_itself_are_not_read(tmp_path: Path) -> None:
    """Symbolic links are skipped, FIFOs too (never opened), and the store inside the folder
    is not archived."""
    folder = tmp_path / "t"
    folder.mkdir()
    write(folder / "cc.jsonl", claude_session())
    (folder / "link.jsonl").symlink_to(folder / "cc.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    db = folder / "store.db"
    report = sync(db, folder)
    assert dict(report.skipped_files) == {
        str(folder / "link.jsonl"): "a symbolic link (not followed)",
        str(folder / "pipe.jsonl"): "not a regular file",
    }
    with store(db) as opened:
        assert [f.path for f in opened.archived_files()] == [str(folder / "cc.jsonl")]


def test_sync_needs_an_archiving_store(tmp_path: Path) -> None:
    """An in-memory node store has no archive: refused; one path may be given alone."""
    with pytest.raises(
        NodeStoreError, match=r"keeps the archive \(SQLite or PostgreSQL\), not Mem"
    ):
        sync_paths([], open_store(None))  # type: ignore[arg-type]
    path = write(tmp_path / "cc.jsonl", claude_session())
    with store(tmp_path / "s.db") as opened:
        assert sync_paths(str(path), opened).new_files == 1
        assert sync_paths(path, opened).to_dict()["files"] == 1


SAMPLES = [
    "yoavf_ai-sessions_claude-code-pomodoro-timer.jsonl",
    "yoavf_ai-sessions_codex-pomodoro-timer.jsonl",
    "Mai0313_VibeCodingTracker_gemini.jsonl",
    "AbdulAlkawasmeh_metadata-aider.aider.chat.history.md",
    "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
]


def _pieces(lines: list[bytes], count: int) -> Iterator[int]:
    step = max(1, len(lines) // count)
    yield from range(step, len(lines), step)
    yield len(lines)


@pytest.mark.parametrize("name", SAMPLES)
def test_real_sessions_synced_as_they_grow(tmp_path: Path, name: str) -> None:
    """Each real line-based sample written in seven pieces, synced after each: the rows of
    a one-shot import (metadata included), and the archive restores it byte for byte."""
    source = shared_path("real_inputs", name)
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / "t" / name
    path.parent.mkdir()
    path.write_bytes(source.read_bytes())
    want = one_shot(tmp_path, path)
    db = tmp_path / "s.db"
    for end in _pieces(lines, 7):
        path.write_bytes(b"".join(lines[:end]))
        sync(db, path)
    assert rows(db) == want
    assert len(want) == len(import_file(source).nodes)
    with store(db) as opened:
        assert b"".join(opened.archived_bytes(str(path))) == source.read_bytes()


def test_documents_are_read_whole_and_their_last_message_is_provisional(tmp_path: Path) -> None:
    """A Gemini CLI JSON session rewritten as it grows (its last message gains its tool
    results): read whole each time, the stale partial node removed, each version archived."""
    messages = [
        {"id": "1", "type": "user", "content": "hi"},
        {"id": "2", "type": "gemini", "content": "",
         "toolCalls": [{"id": "c", "name": "ls", "args": {}}]},
    ]  # fmt: skip
    session = {"sessionId": "s", "projectHash": "p", "messages": messages}
    path = tmp_path / "t" / "session.json"
    path.parent.mkdir()
    path.write_text(json.dumps(session))
    db = tmp_path / "s.db"
    sync(db, path)
    messages[1]["content"] = "Listing."
    messages[1]["toolCalls"][0]["result"] = [
        {"functionResponse": {"id": "c", "response": {"output": "a"}}}
    ]
    messages.append({"id": "3", "type": "gemini", "content": "One file."})
    path.write_text(json.dumps(session, indent=2))
    report = sync(db, path)
    assert report.updated_files == 1
    assert rows(db) == one_shot(tmp_path, path)
    with store(db) as opened:
        assert opened.archived_files()[0].versions == 2


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ([None], "a path to sync must be a str or os.PathLike, not NoneType"),
        ([123], "a path to sync must be a str or os.PathLike, not int"),
        (["a", b"b"], "a path to sync must be a str or os.PathLike, not bytes"),
        (b"in", "paths to sync must be a path or an iterable of paths, not bytes"),
        (7, "paths to sync must be a path or an iterable of paths, not int"),
        (None, "paths to sync must be a path or an iterable of paths, not NoneType"),
        (["a\0b"], "a path to sync holds a NUL character: 'a\\x00b'"),
    ],
)
def test_bad_paths_raise_the_library_error(tmp_path: Path, paths: Any, message: str) -> None:
    """Paths that are not paths raise TranscriptFormatError (never a raw TypeError or
    ValueError), before anything is read or written."""
    with store(tmp_path / "s.db") as opened:
        with pytest.raises(TranscriptFormatError) as caught:
            sync_paths(paths, opened)
        assert str(caught.value) == message
        assert opened.archived_files() == []


def test_a_rewrite_keeps_every_node_of_the_old_version(tmp_path: Path) -> None:
    """The trial's case: a Claude Code session synced, then every line edited (a user name
    replaced), synced again: the store holds the union of both versions' one-shot imports
    (v1's provisional last node included), and a third sync of v2 grown keeps them too."""
    path = tmp_path / "t" / "k.jsonl"
    path.parent.mkdir()
    old = claude_session()
    write(path, old)
    db = tmp_path / "s.db"
    first = sync(db, path)
    v1 = {n.hash for n in import_file(path).nodes}
    assert (first.new_nodes, first.nodes) == (len(v1), len(v1))
    write(path, [line.replace("Read a", "Read A") for line in old])
    v2 = {n.hash for n in import_file(path).nodes}
    second = sync(db, path)
    assert (second.updated_files, second.new_nodes) == (1, len(v2 - v1))
    assert second.nodes == len(v1 | v2)
    assert {r[0] for r in rows(db)} == v1 | v2
    grown = [line.replace("Read a", "Read A") for line in old] + [
        cc_line("u9", "a7", "user", "and now?") + "\n"
    ]
    write(path, grown)
    sync(db, path)
    v3 = {n.hash for n in import_file(path).nodes}
    assert {r[0] for r in rows(db)} == v1 | v3


def test_a_concurrent_sync_counts_only_what_it_committed(
    tmp_path: Path, archive_store: ArchiveTarget
) -> None:
    """Two syncs of the same files, the second committing while the first is reading (on
    SQLite and on PostgreSQL): the first counts no file and no node it did not commit, writes
    nothing twice (each file's version restores byte for byte), and the store equals one
    sync's."""
    folder = tmp_path / "t"
    folder.mkdir()
    write(folder / "a.jsonl", claude_session())
    write(folder / "b.jsonl", codex_rollout())
    reports = []

    def open_archive() -> ArchiveStore:
        opened = open_store(archive_store.store)
        assert isinstance(opened, ArchiveStore)
        return opened

    def other_run(_path: str) -> None:
        if not reports:
            with open_archive() as second:
                reports.append(sync_paths([folder], second))

    with open_archive() as first:
        report = sync_paths([folder], first, progress=other_run)
    assert (reports[0].new_files, reports[0].new_nodes) == (2, len(one_shot(tmp_path, folder)))
    assert (report.files, report.new_files, report.updated_files, report.new_nodes) == (
        2,
        0,
        0,
        0,
    )
    stored = archive_store.sql("SELECT hash, parent_hash, bucket, metadata FROM {nodes}")
    assert sorted(stored) == one_shot(tmp_path, folder)
    with open_archive() as opened:
        assert [(f.version, f.versions) for f in opened.archived_files()] == [(1, 1), (1, 1)]
        for name in ("a.jsonl", "b.jsonl"):
            data = b"".join(opened.archived_bytes(str(folder / name)))
            assert data == (folder / name).read_bytes()


def test_an_empty_jsonl_file_is_detected_again_once_it_holds_records(tmp_path: Path) -> None:
    """An empty ``.jsonl`` file is an empty transcript (archived, zero nodes); once a harness
    writes records into it, its format is detected from them (Codex here), and the store
    holds one import's nodes."""
    path = tmp_path / "t" / "rollout.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    db = tmp_path / "s.db"
    first = sync(db, path)
    assert (first.files, first.new_files, first.skipped, first.new_nodes) == (1, 1, 0, 0)
    with store(db) as opened:
        assert [(f.format, f.nodes, f.size) for f in opened.archived_files()] == [
            ("claude-code", 0, 0)
        ]
    write(path, codex_rollout())
    second = sync(db, path)
    assert (second.updated_files, second.new_nodes) == (1, len(import_file(path).nodes))
    assert rows(db) == one_shot(tmp_path, path)
    with store(db) as opened:
        assert [f.format for f in opened.archived_files()] == ["codex"]
