"""``dag sync``, ``dag restore`` and ``dag sessions``: the acceptance scenario of issue 17,
the JSON documents, exit codes and error lines, old stores."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from servers import ArchiveTarget
from support import cc_line, run_main, shared_path

from merkle_memory.transcripts import import_file

KEYS = ["files", "new_files", "updated_files", "skipped", "new_nodes", "nodes"]


def session_lines(count: int, tag: str = "s") -> list[str]:
    """A Claude Code session of ``count`` user/assistant lines (a chain)."""
    lines = []
    parent = None
    for index in range(count):
        kind = "user" if index % 2 == 0 else "assistant"
        uuid = f"{tag}{index}"
        lines.append(cc_line(uuid, parent, kind, f"{kind} turn {index} of {tag}") + "\n")
        parent = uuid
    return lines


def sync(capsys: pytest.CaptureFixture[str], db: Path | str, *paths: Path) -> dict[str, int]:
    code, out, _err = run_main(
        capsys, "dag", "sync", *map(str, paths), "--store", str(db), "--json"
    )
    assert code == 0
    doc: dict[str, int] = json.loads(out)
    assert list(doc) == KEYS
    return doc


def one_shot(*paths: Path) -> set[str]:
    return {n.hash for path in paths for n in import_file(path).nodes}


def io_copy(tmp_path: Path, lines: list[str]) -> Path:
    """A file outside the synced folder holding ``lines``."""
    path = tmp_path / "copy.jsonl"
    path.write_text("".join(lines))
    return path


def test_sync_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """Issue 17's scenario, on SQLite and on PostgreSQL: sync a folder; sync again (nothing
    new); append the second half of a session (only its new nodes, the store as a one-shot
    import of every file); rewrite a file (read again); delete a file and restore it byte
    for byte."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    grow = session_lines(10, "g")
    (folder / "grow.jsonl").write_text("".join(grow[:5]))
    (folder / "other.jsonl").write_text("".join(session_lines(4, "o")))
    (folder / "keep.jsonl").write_text("".join(session_lines(6, "k")))
    (folder / "README.txt").write_text("not a session")
    db = archive_store.store
    files = [folder / n for n in ("grow.jsonl", "other.jsonl", "keep.jsonl")]

    assert sync(capsys, db, folder) == dict(zip(KEYS, [4, 3, 0, 1, 15, 15], strict=True))
    assert sync(capsys, db, folder) == dict(zip(KEYS, [4, 0, 0, 1, 0, 15], strict=True))

    with (folder / "grow.jsonl").open("a") as handle:
        handle.write("".join(grow[5:]))
    assert sync(capsys, db, folder) == dict(zip(KEYS, [4, 0, 1, 1, 5, 20], strict=True))
    assert archive_store.hashes() == one_shot(*files)

    rewritten = session_lines(4, "r")
    (folder / "other.jsonl").write_text("".join(rewritten))
    doc = sync(capsys, db, folder)
    assert doc == dict(zip(KEYS, [4, 0, 1, 1, 4, 24], strict=True))  # every old node stays
    assert archive_store.hashes() - one_shot(*files) == {
        n.hash for n in import_file(io_copy(tmp_path, session_lines(4, "o"))).nodes
    }

    original = (folder / "keep.jsonl").read_bytes()
    (folder / "keep.jsonl").unlink()
    out = tmp_path / "restored.jsonl"
    code, stdout, err = run_main(
        capsys, "dag", "restore", "--store", str(db), str(folder / "keep.jsonl"), "--out", str(out)
    )
    assert (code, stdout) == (0, "")
    assert err == f"restored {folder / 'keep.jsonl'} ({len(original)} bytes) to {out}\n"
    assert out.read_bytes() == original
    code, stdout, _ = run_main(
        capsys, "dag", "restore", "--store", str(db), str(folder / "other.jsonl"),
        "--version", "1", "--out", "-",
    )  # fmt: skip
    assert (code, stdout) == (0, "".join(session_lines(4, "o")))

    code, stdout, _ = run_main(capsys, "dag", "sessions", "--store", str(db), "--json")
    assert code == 0
    listed = {Path(item["path"]).name: item for item in json.loads(stdout)}
    assert {n: (i["format"], i["version"], i["versions"], i["nodes"], i["exists"])
            for n, i in listed.items()} == {
        "grow.jsonl": ("claude-code", 1, 1, 10, True),
        "other.jsonl": ("claude-code", 2, 2, 4, True),
        "keep.jsonl": ("claude-code", 1, 1, 6, False),
    }  # fmt: skip
    assert listed["keep.jsonl"]["size"] == len(original)
    assert set(listed["keep.jsonl"]) == {
        "path", "format", "size", "version", "versions", "nodes", "digest", "first_sync",
        "last_sync", "error", "exists",
    }  # fmt: skip


def test_sync_human_output_and_skip_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """Without --json: one summary line on stdout; each skipped file named on stderr (-q
    silences it)."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(session_lines(2)))
    (folder / "b.bin").write_bytes(b"\x00\x01")
    db = archive_store.store
    code, out, err = run_main(capsys, "dag", "sync", str(folder), "--store", str(db))
    assert code == 0
    assert out == "2 files: 1 new, 0 updated, 1 skipped; 2 new nodes, 2 in the store\n"
    assert err == f"skipped {folder / 'b.bin'}: no known transcript format\n"
    code, out, err = run_main(capsys, "dag", "sync", str(folder), "--store", str(db), "-q")
    assert (code, err) == (0, "")


def test_sessions_human_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """``dag sessions``: one line per archived file; a deleted one is marked."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(session_lines(2)))
    db = archive_store.store
    sync(capsys, db, folder)
    (folder / "a.jsonl").unlink()
    code, out, err = run_main(capsys, "dag", "sessions", "--store", str(db))
    assert code == 0 and err == "1 archived files\n"
    fields = out.split()
    assert fields[1:6] == ["claude-code", str(len("".join(session_lines(2)))), "v1", "2", "nodes"]
    assert fields[6:] == [str(folder / "a.jsonl"), "[deleted]"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dag", "restore", "--store", "{db}", "{folder}/nope.jsonl", "--out", "{out}"],
         "error: no archived file {folder}/nope.jsonl in {db}\n"),
        (["dag", "restore", "--store", "{db}", "{folder}/a.jsonl", "--version", "2", "--out",
          "{out}"], "error: no version 2 of {folder}/a.jsonl (versions 1 to 1)\n"),
    ],
)  # fmt: skip
def test_restore_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    archive_store: ArchiveTarget,
    argv: list[str],
    message: str,
) -> None:
    """Unknown path, unknown version: one error line, exit 1, no output."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(session_lines(2)))
    db = archive_store.store
    sync(capsys, db, folder)
    values = {"db": archive_store.location, "folder": str(folder), "out": str(tmp_path / "out")}
    argv = [part.replace("{db}", db) for part in argv]
    code, out, err = run_main(capsys, *(part.format(**values) for part in argv))
    assert (code, out, err) == (1, "", message.format(**values))
    assert not (tmp_path / "out").exists()


def test_sessions_of_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing SQLite store, a database without the schema: one error line, exit 1."""
    code, out, err = run_main(capsys, "dag", "sessions", "--store", str(tmp_path / "no.db"))
    assert (code, out, err) == (1, "", f"error: no node store at {tmp_path / 'no.db'}\n")


def test_restore_refuses_tampered_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """A chunk altered in the store fails its digest: exit 1, and the output file is not
    created (the bytes are written to a temporary file first)."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(session_lines(2)))
    db = archive_store.store
    sync(capsys, db, folder)
    archive_store.sql("UPDATE {chunks} SET data = ?", zlib.compress(b"forged"))
    out = tmp_path / "out.jsonl"
    code, stdout, err = run_main(
        capsys, "dag", "restore", "--store", db, str(folder / "a.jsonl"), "--out", str(out)
    )
    assert (code, stdout) == (1, "")
    assert err.startswith(f"error: archive of {folder / 'a.jsonl'}: chunk ")
    assert err.endswith(" does not match its digest\n")
    assert not [p.name for p in tmp_path.iterdir() if "out.jsonl" in p.name]


V1_SCHEMA = """
CREATE TABLE nodes (
    seq INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, parent_hash TEXT,
    role TEXT NOT NULL, bucket TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX nodes_parent ON nodes (parent_hash, seq);
PRAGMA user_version = 1;
"""


def test_a_version_1_store_opens_and_is_upgraded_by_sync(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store written by the previous schema: read as it is (no archive, not changed), and
    upgraded to version 2 by the first sync, its nodes kept."""
    source = tmp_path / "a.jsonl"
    source.write_text("".join(session_lines(2)))
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")  # as version 1 created its stores
    con.executescript(V1_SCHEMA)
    node = import_file(source).nodes[0]
    con.execute(
        "INSERT INTO nodes (hash, parent_hash, role, bucket, metadata) VALUES (?, ?, ?, ?, ?)",
        (node.hash, None, "user", node.bucket.to_json().decode(), "{}"),
    )
    con.commit()
    con.close()
    before = db.read_bytes()
    code, out, _ = run_main(capsys, "dag", "sessions", "--store", str(db), "--json")
    assert (code, out) == (0, "[]\n")
    code, out, _ = run_main(capsys, "dag", "verify", "--store", str(db), "--json")
    assert code == 0 and json.loads(out)["nodes"] == 1
    assert db.read_bytes() == before
    assert sync(capsys, db, source) == dict(zip(KEYS, [1, 1, 0, 0, 1, 2], strict=True))
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    con.close()


def test_sync_of_the_real_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All of ../shared/real_inputs: every transcript imported with its hand-counted nodes
    (SOURCES.md skipped, the Cline task's two other files archived), then nothing new."""
    folder = tmp_path / "real"
    shutil.copytree(shared_path("real_inputs"), folder)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    db = tmp_path / "s.db"
    first = sync(capsys, db, folder)
    assert first == dict(zip(KEYS, [16, 15, 0, 1, 467, 467], strict=True))
    assert sync(capsys, db, folder) == dict(zip(KEYS, [16, 0, 0, 1, 0, 467], strict=True))
    code, out, _ = run_main(capsys, "dag", "verify", "--store", str(db), "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_restore_write_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dag restore`` writes a temporary file beside the output, fsyncs it, renames it over
    the output, then fsyncs the folder: the recorded order of those calls."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(session_lines(2)))
    db = tmp_path / "s.db"
    sync(capsys, db, folder)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    events: list[tuple[str, str]] = []
    names: dict[int, str] = {}
    real_open, real_fsync, real_replace = os.open, os.fsync, os.replace

    def where(path: Any) -> str:
        text = os.fsdecode(path)
        if not text.startswith(str(out_dir)):
            return "elsewhere"
        name = os.path.relpath(text, out_dir)
        return "TEMP" if name.startswith(".restored.jsonl.") else name

    def opening(path: Any, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, *args, **kwargs)
        names[fd] = where(path)
        return fd

    def syncing(fd: int) -> None:
        events.append(("fsync", names.get(fd, "elsewhere")))
        real_fsync(fd)

    def replacing(src: Any, dst: Any) -> None:
        events.append(("replace", f"{where(src)} -> {where(dst)}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "fsync", syncing)
    monkeypatch.setattr(os, "replace", replacing)
    out = out_dir / "restored.jsonl"
    code, _, _ = run_main(
        capsys, "dag", "restore", "--store", str(db), str(folder / "a.jsonl"), "--out", str(out)
    )
    assert code == 0
    mine = [event for event in events if "elsewhere" not in event[1]]
    assert mine == [("fsync", "TEMP"), ("replace", "TEMP -> restored.jsonl"), ("fsync", ".")]
    assert out.read_text() == "".join(session_lines(2))


def test_hostile_folder_never_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage, a JSON text too deep for the parser, a transcript with a bad line, an empty
    JSONL file and an unreadable folder: exit 0, each named on stderr (but the empty file:
    an empty transcript), and the good session imported."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "good.jsonl").write_text("".join(session_lines(2)))
    (folder / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "deep.json").write_text("[" * 100_000)
    (folder / "bad.jsonl").write_text(session_lines(2)[0] + "{oops\n" + session_lines(2)[1])
    (folder / "empty.jsonl").write_bytes(b"")
    locked = folder / "locked"
    locked.mkdir()
    (locked / "x.jsonl").write_text("".join(session_lines(2)))
    locked.chmod(0)
    try:
        code, out, err = run_main(
            capsys, "dag", "sync", str(folder), "--store", str(tmp_path / "s.db"), "--json"
        )
    finally:
        locked.chmod(0o755)
    assert code == 0 and "Traceback" not in err
    doc = json.loads(out)
    assert doc["new_nodes"] == 2
    assert f"skipped {folder / 'garbage.bin'}: no known transcript format" in err
    assert f"skipped {folder / 'deep.json'}: no known transcript format" in err
    assert f"{folder / 'empty.jsonl'}" not in err  # an empty transcript: archived, 0 nodes
    assert f"archived, not imported: {folder / 'bad.jsonl'}:2: not a JSON line" in err
    if os.geteuid() != 0:  # root reads any folder
        assert f"skipped {locked}: cannot read: Permission denied" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["dag", "sync", "{dir}", "--store", "{url}"],
        ["dag", "sessions", "--store", "{url}"],
        ["dag", "restore", "--store", "{url}", "x.jsonl", "--out", "-"],
        ["dag", "sessions", "--store", "{url}", "--json"],
    ],
)
def test_an_unreachable_postgresql_store_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A postgresql:// store is taken (the archive lives there too): one that cannot be
    reached is one error line with the password redacted, exit 1, no traceback. Without
    psycopg (a plain ``pip install -e '.[test]'``) the one line names the missing extra."""
    url = "postgresql://agent:hunter2@localhost:1/db"
    filled = [a.format(dir=tmp_path, url=url) for a in argv]
    code, out, err = run_main(capsys, *filled)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "hunter2" not in err
    if importlib.util.find_spec("psycopg") is None:
        assert err == (
            "error: PostgreSQL support needs psycopg 3: pip install 'merkle_memory[postgres]' "
            "(No module named 'psycopg')\n"
        )
    else:
        assert err.startswith("error: postgresql://agent:***@localhost:1/db: cannot connect: ")


def test_a_name_that_is_not_utf8_is_archived_and_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], archive_store: ArchiveTarget
) -> None:
    """A file name with a byte that is not UTF-8 (0xff) is archived beside the others, its
    name kept byte for byte (a BLOB in SQLite, bytea in PostgreSQL), listed (by the bytes of
    the names), and restored by the same name given on the command line (Python decodes
    argv with surrogateescape); JSON output names it with ``\\xff`` and holds no lone
    surrogate."""
    folder = tmp_path / "t"
    folder.mkdir()
    data = "".join(session_lines(4)).encode()
    bad = os.fsdecode(bytes(folder) + b"/bad\xff.jsonl")
    Path(bad).write_bytes(data)
    (folder / "good.jsonl").write_bytes(data)
    db = archive_store.store
    assert sync(capsys, db, folder) == {
        "files": 2, "new_files": 2, "updated_files": 0, "skipped": 0, "new_nodes": 4,
        "nodes": 4,
    }  # fmt: skip
    stored = sorted(
        archive_store.sql("SELECT path FROM {files}"), key=lambda r: type(r[0]).__name__
    )
    if archive_store.kind == "sqlite":
        assert stored == [(bytes(folder) + b"/bad\xff.jsonl",), (str(folder / "good.jsonl"),)]
    else:
        assert sorted(stored) == [
            (bytes(folder) + b"/bad\xff.jsonl",),
            (bytes(folder / "good.jsonl"),),
        ]
    Path(bad).unlink()
    code, out, err = run_main(capsys, "dag", "restore", "--store", db, bad, "--out", "-")
    assert (code, out, err) == (0, data.decode(), "")
    out_file = tmp_path / "back.jsonl"
    code, _out, err = run_main(capsys, "dag", "restore", "--store", db, bad, "--out", str(out_file))
    assert (code, out_file.read_bytes()) == (0, data)
    shown = f"{folder}/bad\\xff.jsonl"  # the byte as the JSON output names it (trial 3, 11)
    assert err == f"restored {shown} ({len(data)} bytes) to {out_file}\n"
    code, out, _err = run_main(capsys, "dag", "sessions", "--store", str(db))
    assert code == 0 and "\\udcff" not in out
    assert [line.split("nodes  ")[1] for line in out.splitlines()] == [
        f"{shown}  [deleted]",
        str(folder / "good.jsonl"),
    ]
    code, out, _err = run_main(capsys, "dag", "sessions", "--store", str(db), "--json")
    assert code == 0
    out.encode("utf-8")  # no lone surrogate: strict UTF-8
    listed = json.loads(out)
    assert [(f["path"], f["exists"], f["nodes"]) for f in listed] == [
        (str(folder) + "/bad\\xff.jsonl", False, 4),
        (str(folder / "good.jsonl"), True, 4),
    ]
    assert sync(capsys, db, folder)["new_nodes"] == 0  # remembered by its exact name


def test_json_output_of_a_name_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dag import --json`` and ``ledger verify --json`` on names with byte 0xff: the JSON
    text is strict UTF-8 (no lone surrogate, no ``\\udcff`` escape) and names the byte as
    ``\\xff``."""
    name = os.fsdecode(b"k\xff.jsonl")
    (tmp_path / name).write_text("".join(session_lines(2)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, _err = run_main(capsys, "dag", "import", "--json", name)
    assert code == 0
    assert "\\udcff" not in out and "\\\\xff" in out
    assert json.loads(out.encode("utf-8"))["files"][0]["path"] == "k\\xff.jsonl"
    tenant = os.fsdecode(b"k\xff")
    assert run_main(capsys, "ledger", "init", tenant)[0] == 0
    code, out, _err = run_main(capsys, "ledger", "verify", "--json", tenant)
    assert (code, list(json.loads(out.encode("utf-8")))) == (0, ["k\\xff"])
    assert "\\udcff" not in out
