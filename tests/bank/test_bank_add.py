"""``MemoryBank.add`` (the same memory whatever its default timestamp), ``resolve`` (unique id
prefixes) and legacy files in verify (issue 16 items 4, 5 and 7)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import T0, asset_path, ledger_lines, legacy_file

from merkle_memory.bank import AddResult, BankProblem, MemoryBank, StoredMemory
from merkle_memory.bank.memory import Memory
from merkle_memory.errors import BankError, MemoryNotFoundError


def test_adding_the_same_memory_twice_writes_nothing_the_second_time(tmp_path: Path) -> None:
    """Without a timestamp, the second add of the same fields (tags and links in another
    order, duplicated) finds the first memory: same id, created False, no new file, no new
    ledger line."""
    bank = MemoryBank(tmp_path / "bank")
    first = bank.add("fact", "project", "Tests use pytest", tags=["b", "a"], links=["urn:x:1"])
    files = sorted(p.name for p in bank.active_dir.iterdir())
    second = bank.add(
        "fact", "project", "Tests use pytest", tags=["a", "b", "a"], links=["urn:x:1"]
    )
    assert first.created is True and second.created is False
    assert second == AddResult(first.stored, created=False)
    assert sorted(p.name for p in bank.active_dir.iterdir()) == files
    assert [line["memory_id"] for line in ledger_lines(bank)] == [first.id]
    assert second.to_dict() == {
        "id": first.id,
        "created": False,
        "status": "active",
        "file": f"memories/{first.stored.memory.file_name}",
    }


@pytest.mark.parametrize(
    "change",
    [
        {"type": "decision"},
        {"scope": "user"},
        {"content": "Tests use pytest "},
        {"tags": ["x"]},
        {"source_session": "s1"},
        {"source_session": ""},
        {"links": ["urn:x:2"]},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_other_field_makes_another_memory(tmp_path: Path, change: dict[str, object]) -> None:
    """A different type, scope, content (one space), tag set, source session (``""`` is not
    ``None``) or link set is another memory: a new id and a new file."""
    bank = MemoryBank(tmp_path / "bank")
    fields: dict[str, object] = {"type": "fact", "scope": "project", "content": "Tests use pytest"}
    first = bank.add(**fields)  # type: ignore[arg-type]
    other = bank.add(**{**fields, **change})  # type: ignore[arg-type]
    assert other.created and other.id != first.id
    assert len(ledger_lines(bank)) == 2


def test_an_explicit_timestamp_is_part_of_the_memory(tmp_path: Path) -> None:
    """With a timestamp the time is part of the identity: the same time gives the same id
    and writes nothing; another time gives a new memory, even when one exists without it."""
    bank = MemoryBank(tmp_path / "bank")
    first = bank.add("fact", "p", "x", timestamp=T0)
    again = bank.add("fact", "p", "x", timestamp=T0)
    later = bank.add("fact", "p", "x", timestamp=T0 + timedelta(hours=1))
    assert first.id == Memory("fact", "p", "x", timestamp=T0).id
    assert (again.id, again.created) == (first.id, False)
    assert later.created and later.id != first.id
    found = bank.add("fact", "p", "x")  # no timestamp: the earliest of the two
    assert (found.id, found.created) == (first.id, False)


def test_an_archived_memory_is_found_but_an_active_one_first(tmp_path: Path) -> None:
    """The same memory only in the archive is found there (not un-archived, not re-saved);
    when an active copy (another timestamp) exists, the active one is returned."""
    bank = MemoryBank(tmp_path / "bank")
    old = bank.add("fact", "p", "x", timestamp=T0)
    bank.archive(old.id)
    found = bank.add("fact", "p", "x")
    assert (found.id, found.created, found.stored.status) == (old.id, False, "archived")
    active = bank.add("fact", "p", "x", timestamp=T0 + timedelta(days=1))
    assert bank.add("fact", "p", "x").stored == active.stored


def test_an_unsealed_twin_is_sealed_when_found(tmp_path: Path) -> None:
    """A memory whose seal a crash lost (file present, no ledger line) is sealed when add
    finds it."""
    bank = MemoryBank(tmp_path / "bank")
    memory = Memory("fact", "p", "x", timestamp=T0)
    bank.add("fact", "p", "warm-up", timestamp=T0)  # creates the bank
    (bank.active_dir / memory.file_name).write_bytes(memory.to_bytes())
    found = bank.add("fact", "p", "x")
    assert (found.id, found.created) == (memory.id, False)
    assert [line["memory_id"] for line in ledger_lines(bank)][-1] == memory.id
    assert bank.verify().ok


def test_two_threads_adding_the_same_memory_save_it_once(tmp_path: Path) -> None:
    """The lookup and the save happen under the bank lock: concurrent adds of one memory
    give one id and one file."""
    root = tmp_path / "bank"
    MemoryBank(root).add("fact", "p", "warm-up")
    results: list[AddResult] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        results.append(MemoryBank(root).add("fact", "p", "same"))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({r.id for r in results}) == 1
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len(list(MemoryBank(root).active_dir.glob("*.json"))) == 2


@settings(max_examples=25, deadline=None)
@given(
    content=st.text(max_size=20),
    tags=st.lists(st.sampled_from(["a", "b", "c"]), max_size=4),
    shift=st.integers(min_value=1, max_value=10**6),
)
def test_add_finds_what_a_naive_search_finds(content: str, tags: list[str], shift: int) -> None:
    """Against a naive reference (list every memory, compare the fields but the timestamp):
    add returns the earliest match, or saves a new memory when there is none."""
    with tempfile.TemporaryDirectory() as folder:
        bank = MemoryBank(Path(folder) / "bank")
        bank.add("fact", "p", "other", timestamp=T0)
        bank.add("fact", "p", content, tags=tags[:1], timestamp=T0 + timedelta(seconds=shift))
        bank.add("fact", "p", content, tags=tags, timestamp=T0 + timedelta(seconds=shift + 1))
        wanted = Memory("fact", "p", content, tags)
        naive = sorted(
            (s.memory.timestamp, s.memory.id)
            for s in bank.memories(archived=None)
            if (s.memory.type, s.memory.scope, s.memory.content, s.memory.tags)
            == (wanted.type, wanted.scope, wanted.content, wanted.tags)
            and (s.memory.source_session, s.memory.links) == (None, ())
        )
        result = bank.add("fact", "p", content, tags=tags)
        assert naive and (result.id, result.created) == (naive[0][1], False)


# --- resolve -------------------------------------------------------------------------------


def test_resolve_accepts_a_unique_prefix_of_an_active_or_archived_memory(tmp_path: Path) -> None:
    """A prefix of 4+ hex digits names the one memory whose id starts with it (archived ones
    too, and a whole id); an unknown prefix and a malformed one are refused."""
    bank = MemoryBank(tmp_path / "bank")
    ids = [bank.add("fact", "p", f"m{i}", timestamp=T0).id for i in range(3)]
    bank.archive(ids[0])
    assert [bank.resolve(memory_id[:6]) for memory_id in ids] == ids
    assert bank.resolve(ids[1]) == ids[1]
    unknown = next(
        f"{n:04x}" for n in range(65536) if not any(i.startswith(f"{n:04x}") for i in ids)
    )
    with pytest.raises(MemoryNotFoundError, match=f"no memory {unknown} in "):
        bank.resolve(unknown)
    for bad in ("abc", "ABCD", "xyz1", "a" * 65, ""):
        with pytest.raises(BankError, match="not a memory id or id prefix"):
            bank.resolve(bad)
    with pytest.raises(BankError, match="no memory bank at"):
        MemoryBank(tmp_path).resolve(ids[0])


def test_resolve_reports_an_ambiguous_prefix(tmp_path: Path) -> None:
    """Two files whose ids share their first 4 hex digits: that prefix is ambiguous, one
    digit past their common prefix resolves each."""
    bank = MemoryBank(tmp_path / "bank")
    seen: dict[str, Memory] = {}
    n = 0
    while True:  # birthday search: about 300 memories for a shared 4-digit prefix
        memory = Memory("fact", "p", f"m{n}", timestamp=T0)
        n += 1
        if memory.id[:4] in seen:
            break
        seen[memory.id[:4]] = memory
    twin = seen[memory.id[:4]]
    bank.save(memory)
    bank.save(twin)
    with pytest.raises(BankError, match=f"memory id prefix {memory.id[:4]} is ambiguous"):
        bank.resolve(memory.id[:4])
    common = next(i for i in range(4, 64) if memory.id[i] != twin.id[i])
    assert bank.resolve(memory.id[: common + 1]) == memory.id
    assert bank.resolve(twin.id[: common + 1]) == twin.id


# --- legacy files in verify ---------------------------------------------------------------


def test_verify_calls_legacy_files_legacy(tmp_path: Path) -> None:
    """The legacy sample store: its three legacy memories are ``legacy`` problems (not
    ``not_a_memory``), the unparseable file stays ``unparseable``; after a migration the
    bank verifies."""
    bank_path = tmp_path / "bank"
    shutil.copytree(asset_path("bank", "legacy"), bank_path)
    for path in [bank_path, *bank_path.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (bank_path / "memories" / "notes.json").unlink()
    bank = MemoryBank(bank_path)
    report = bank.verify()
    assert [(p.path, p.kind) for p in report.problems] == [
        ("memories/0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11.json", "legacy"),
        ("memories/20260402_083000_insight_5f2c9a40.json", "legacy"),
        ("memories/archive/7a1f6c2e-0b9d-4e3a-8f51-2c6d9e0b1a73.json", "legacy"),
    ]
    assert report.problems[0] == BankProblem(
        "memories/0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11.json",
        "legacy",
        "a legacy memory file (legacy id '0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11'), not "
        "content-addressed yet: migrate it (`merkle-memory bank migrate`, MemoryBank.migrate)",
    )
    assert not report.ok
    assert bank.migrate().migrated == 3
    assert bank.verify().ok


def test_what_is_not_legacy_stays_what_it_is(tmp_path: Path) -> None:
    """A file with a schema (a damaged new-style memory), one without an id, one missing a
    required field, and a symlinked .yaml are not called legacy; a plain .yaml file is."""
    bank = MemoryBank(tmp_path / "bank")
    kept = bank.add("fact", "p", "keep", timestamp=T0)
    folder = bank.active_dir
    legacy_file(folder, "no-id.json", "x")
    data = json.loads((folder / "no-id.json").read_text())
    del data["id"]
    (folder / "no-id.json").write_text(json.dumps(data))
    legacy_file(folder, "no-scope.json", "y")
    data = json.loads((folder / "no-scope.json").read_text())
    del data["scope"]
    (folder / "no-scope.json").write_text(json.dumps(data))
    legacy_file(folder, "schema.json", "z", schema="memory/0")
    (folder / "old.yaml").write_text("id: q\n")
    (folder / "link.yaml").symlink_to(folder / "old.yaml")
    kinds = {p.path.rsplit("/", 1)[1]: p.kind for p in bank.verify().problems}
    assert kinds == {
        "link.yaml": "unexpected_file",
        "no-id.json": "not_a_memory",
        "no-scope.json": "not_a_memory",
        "old.yaml": "legacy",
        "schema.json": "not_a_memory",
    }
    assert isinstance(bank.locate(kept.id), StoredMemory)


def test_a_legacy_file_is_legacy_whatever_its_status(tmp_path: Path) -> None:
    """A legacy file with an unknown status (migrate skips it) is still a legacy file."""
    bank = MemoryBank(tmp_path / "bank")
    bank.add("fact", "p", "keep", timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    legacy_file(bank.active_dir, "odd.json", "odd-1", status="weird")
    problems = bank.verify().problems
    assert [(p.path, p.kind) for p in problems] == [("memories/odd.json", "legacy")]
