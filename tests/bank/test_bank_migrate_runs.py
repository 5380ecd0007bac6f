"""Tests of MemoryBank.migrate: the legacy status picks the folder, and the migration index
``memories/.migrated.json`` resolves links to memories migrated by an earlier run."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import legacy_file

from merkle_memory import canonical
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.cli import main
from merkle_memory.errors import BankError

TS = datetime(2026, 1, 1, tzinfo=UTC)
INDEX = ".migrated.json"


def plain(content: str, links: tuple[str, ...] = ()) -> Memory:
    """The memory a legacy_file with this content and these links becomes."""
    return Memory("fact", "project", content, [], TS, None, links)


def index_of(root: Path) -> dict[str, Any]:
    """The parsed migration index of the bank at ``root``."""
    parsed: dict[str, Any] = json.loads((root / "memories" / INDEX).read_bytes())
    return parsed


# --- status -> folder ---------------------------------------------------------------------------

STATUS_CASES = [
    # (folder, status or "<absent>", expected new_status)
    ("memories", "active", "active"),
    ("memories", "pending_approval", "active"),
    ("memories", None, "active"),
    ("memories", "<absent>", "active"),
    ("memories", "archived", "archived"),
    ("memories", "subsumed", "archived"),
    ("memories", "superseded", "archived"),
    ("memories", "falsified", "archived"),
    ("memories/archive", "active", "archived"),
    ("memories/archive", "archived", "archived"),
    ("memories/archive", "something-else", "archived"),
    ("memories/archive", "<absent>", "archived"),
]


@pytest.mark.parametrize(("folder", "status", "expected"), STATUS_CASES)
def test_legacy_status_and_folder_pick_where_the_new_file_goes(
    tmp_path: Path, folder: str, status: str | None, expected: str
) -> None:
    """Status is where the file is: archived/subsumed/superseded/falsified in memories/ go to
    memories/archive/; active, pending_approval, null or no status stay; a file already in
    archive/ stays archived whatever its status. The report says where each went."""
    extra = {} if status == "<absent>" else {"status": status}
    legacy = legacy_file(tmp_path / folder, "old.json", "L1", **extra)
    report = MemoryBank(tmp_path).migrate()
    memory = plain("L1")
    where = "memories/archive" if expected == "archived" else "memories"
    assert [(f.path, f.new_path, f.new_status, f.id) for f in report.files] == [
        (f"{folder}/old.json", f"{where}/{memory.file_name}", expected, memory.id)
    ]
    assert report.files[0].status == (None if status == "<absent>" else status)
    assert report.to_dict()["files"][0]["new_status"] == expected
    assert not legacy.exists() and (tmp_path / where / memory.file_name).is_file()
    stored = MemoryBank(tmp_path).locate(memory.id)
    assert stored.status == expected and stored.memory == memory
    assert MemoryBank(tmp_path).verify().ok


@pytest.mark.parametrize("status", ["draft", "ARCHIVED", 3, ["archived"]])
def test_an_unknown_status_in_memories_is_skipped_untouched(tmp_path: Path, status: Any) -> None:
    """A status the migration cannot place (not one of the known values, or not a string) in
    memories/: skipped with the reason, the file left byte-for-byte, nothing written."""
    legacy = legacy_file(tmp_path / "memories", "odd.json", "L1", status=status)
    before = legacy.read_bytes()
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 0
    assert [(i.path, i.reason) for i in report.skipped] == [
        (
            "memories/odd.json",
            f"unknown legacy status {str(status)[:40]!r} (known: active, archived, falsified, "
            "pending_approval, subsumed, superseded); cannot tell whether it is active or "
            "archived",
        )
    ]
    assert legacy.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "memories").iterdir()) == ["odd.json"]


def test_cli_text_report_says_where_each_file_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bank migrate` text output: `LEGACY -> NEW (active|archived; legacy status '...')`."""
    legacy_file(tmp_path / "memories", "a.json", "A", status="archived")
    legacy_file(tmp_path / "memories", "b.json", "B")
    code = main(["bank", "migrate", str(tmp_path)])
    out, err = capsys.readouterr()
    a, b = plain("A"), plain("B")
    assert code == 0
    assert out == (
        f"memories/a.json -> memories/archive/{a.file_name} (archived; legacy status "
        "'archived')\n"
        f"memories/b.json -> memories/{b.file_name} (active)\n"
    )
    assert err == "migrated 2 file(s)\n"


# --- the migration index: links across runs -------------------------------------------------------


def test_a_later_run_resolves_links_to_memories_migrated_earlier(tmp_path: Path) -> None:
    """Migrate A; later add legacy B linking mm://memory/<A's legacy id>#refines: the second
    run rewrites B's link to A's new id (no unresolved link); the index holds both; a third
    run changes nothing, the index's bytes included."""
    folder = tmp_path / "memories"
    legacy_file(folder, "a.json", "A")
    first = MemoryBank(tmp_path).migrate()
    a = plain("A")
    assert [f.id for f in first.files] == [a.id]
    assert index_of(tmp_path) == {"ids": {"A": a.id}, "schema": "migrated/1"}
    legacy_file(folder, "b.json", "B", links=[{"uri": "mm://memory/A", "relation": "refines"}])
    second = MemoryBank(tmp_path).migrate()
    b = plain("B", (f"mm://memory/{a.id}#refines",))
    assert [(f.path, f.id) for f in second.files] == [("memories/b.json", b.id)]
    assert second.unresolved_links == () and second.cycles == ()
    assert MemoryBank(tmp_path).get(b.id).links == (f"mm://memory/{a.id}#refines",)
    index_bytes = (folder / INDEX).read_bytes()
    assert index_bytes == canonical.dumps({"ids": {"A": a.id, "B": b.id}, "schema": "migrated/1"})
    third = MemoryBank(tmp_path).migrate()
    assert third.migrated == 0 and (folder / INDEX).read_bytes() == index_bytes
    verified = MemoryBank(tmp_path).verify()
    assert verified.ok and verified.problems == () and verified.active == 2


def test_the_index_is_not_a_memory_for_verify_and_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify and list skip a well-formed index (no problem, no warning); a malformed one is
    reported by verify as unparseable, with exit 1."""
    legacy_file(tmp_path / "memories", "a.json", "A")
    MemoryBank(tmp_path).migrate()
    assert main(["bank", "list", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(plain("A").id) and err == ""
    (tmp_path / "memories" / INDEX).write_bytes(b'{"ids": {"A": "short"}, "schema": "migrated/1"}')
    report = MemoryBank(tmp_path).verify()
    assert [(p.path, p.kind, p.reason) for p in report.problems] == [
        (f"memories/{INDEX}", "unparseable", "migration index: bad entry 'A': 'short'")
    ]
    assert main(["bank", "verify", str(tmp_path)]) == 1


def test_a_malformed_index_stops_the_migration_before_any_change(tmp_path: Path) -> None:
    """An index that does not parse: BankError naming it, no file written or removed, the
    index left as it is (the run must not overwrite the earlier mapping)."""
    legacy = legacy_file(tmp_path / "memories", "a.json", "A")
    (tmp_path / "memories" / INDEX).write_bytes(b"not json")
    with pytest.raises(BankError, match=r"^cannot read the migration index memories/\.migr"):
        MemoryBank(tmp_path).migrate()
    assert legacy.is_file() and (tmp_path / "memories" / INDEX).read_bytes() == b"not json"
    assert sorted(p.name for p in (tmp_path / "memories").iterdir()) == [INDEX, "a.json"]


def test_a_legacy_id_migrated_earlier_to_another_memory_is_skipped(tmp_path: Path) -> None:
    """A legacy file reusing a legacy id the index maps to a different memory (e.g. an edited
    copy restored later): skipped with the reason, left untouched."""
    legacy_file(tmp_path / "memories", "a.json", "A")
    MemoryBank(tmp_path).migrate()
    again = legacy_file(tmp_path / "memories", "a2.json", "A", content="edited")
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 0
    assert [(i.path, i.reason) for i in report.skipped] == [
        (
            "memories/a2.json",
            f"legacy id 'A' was migrated by an earlier run to {plain('A').id}, but this file "
            f"gives {plain('edited').id}; left as is",
        )
    ]
    assert again.is_file()


def test_cli_warns_about_unresolved_links_and_cycles_in_text_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text mode prints each cycle and each link kept unresolved as a `warning:` line on
    stderr (before only --json had unresolved_links); -q silences them."""
    folder = tmp_path / "memories"
    legacy_file(folder, "a.json", "A", links=["mm://memory/B"])
    legacy_file(folder, "b.json", "B", links=["mm://memory/A"])
    legacy_file(folder, "e.json", "E", links=["mm://memory/GONE#x"])
    code = main(["bank", "migrate", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0 and out.count("\n") == 3
    assert err == (
        "warning: links in a cycle keep legacy ids: A, B\n"
        "warning: unresolved link kept in memories/a.json: mm://memory/B\n"
        "warning: unresolved link kept in memories/b.json: mm://memory/A\n"
        "warning: unresolved link kept in memories/e.json: mm://memory/GONE#x\n"
        "migrated 3 file(s)\n"
    )
    legacy_file(folder, "f.json", "F", links=["mm://memory/GONE"])
    assert main(["bank", "migrate", str(tmp_path), "-q"]) == 0
    assert capsys.readouterr().err == ""


def _migrate_in_runs(root: Path, links: list[list[int]], runs: list[int]) -> dict[str, str]:
    """Write legacy files N0..Nk (Ni linking to N<j> for j in links[i]) in the run runs[i];
    migrate after each run; return legacy id -> new id."""
    ids: dict[str, str] = {}
    for run in sorted(set(runs)):
        for i, targets in enumerate(links):
            if runs[i] == run:
                uris = [f"mm://memory/N{j}" for j in targets]
                legacy_file(root / "memories", f"n{i}.json", f"N{i}", links=uris)
        report = MemoryBank(root).migrate()
        assert report.unresolved_links == () and report.skipped == ()
        ids.update({f.legacy_id: f.id for f in report.files})
    return ids


@st.composite
def _dag_and_runs(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """Links from each node to earlier ones (a DAG), and run numbers where every target is
    migrated in the same run as its dependent or before."""
    size = draw(st.integers(1, 5))
    links = [sorted(draw(st.sets(st.integers(0, i - 1)))) if i else [] for i in range(size)]
    runs: list[int] = []
    for i in range(size):
        floor = max((runs[j] for j in links[i]), default=0)
        runs.append(draw(st.integers(floor, floor + 2)))
    return links, runs


@settings(max_examples=25, deadline=None)
@given(_dag_and_runs())
def test_migrating_in_several_runs_gives_the_ids_of_one_run(
    case: tuple[list[list[int]], list[int]],
) -> None:
    """Property: for links without cycles, migrating the files over several runs (each target
    no later than its dependents) gives every memory the id a single run gives."""
    links, runs = case
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as many:
        single = _migrate_in_runs(Path(one), links, [0] * len(links))
        split = _migrate_in_runs(Path(many), links, runs)
        assert split == single
        assert index_of(Path(many)) == {"ids": single, "schema": "migrated/1"}
