"""Tests of MemoryBank.migrate (merkle_memory._migrate): legacy files -> content-addressed."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import legacy_bank as sample_bank
from support import legacy_file as support_legacy_file

from merkle_memory.bank import MemoryBank, _migrate
from merkle_memory.bank.memory import Memory

FACT_LEGACY = "0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11"


def legacy_file(folder: Path, name: str, legacy_id: str, **fields: Any) -> Path:
    """``support.legacy_file`` with ``status: "active"`` unless another is given."""
    return support_legacy_file(folder, name, legacy_id, **{"status": "active", **fields})


def test_sample_store_migrates_with_exact_ids(tmp_path: Path) -> None:
    """The shared sample: 3 migrated with ids worked out from the DESIGN rules, the naive
    timestamp read as UTC and reported, the link object rewritten to the new id, the archived
    file kept in archive/, the unparseable file reported and untouched."""
    root = sample_bank(tmp_path)
    broken = (root / "memories" / "notes.json").read_bytes()
    report = MemoryBank(root).migrate()
    fact = Memory(
        "fact",
        "project",
        "Project uses FastAPI",
        ["cli", "manual"],
        datetime(2026, 4, 1, 10, 0, tzinfo=UTC),
        "session_123",
    )
    insight = Memory(
        "insight",
        "project",
        "Prefers small PRs",
        [],
        datetime(2026, 4, 2, 8, 30, tzinfo=UTC),
        None,
        [f"mm://memory/{fact.id}#supports", "https://example.org/guide"],
    )
    pref = Memory("preference", "user", "tabs", [], datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    assert report.migrated == 3
    files = [(f.path, f.new_path, f.new_status, f.legacy_id, f.id, f.status) for f in report.files]
    assert files == [
        (
            f"memories/{FACT_LEGACY}.json",
            f"memories/{fact.file_name}",
            "active",
            FACT_LEGACY,
            fact.id,
            "active",
        ),
        (
            "memories/20260402_083000_insight_5f2c9a40.json",
            f"memories/{insight.file_name}",
            "active",
            "5f2c9a40-8d1e-4c6b-b2f7-3e9d1a7c4b20",
            insight.id,
            "pending_approval",
        ),
        (
            "memories/archive/7a1f6c2e-0b9d-4e3a-8f51-2c6d9e0b1a73.json",
            f"memories/archive/{pref.file_name}",
            "archived",
            "7a1f6c2e-0b9d-4e3a-8f51-2c6d9e0b1a73",
            pref.id,
            "archived",
        ),
    ]
    assert report.naive_timestamps == (f"memories/{FACT_LEGACY}.json",)
    assert [i.path for i in report.unparseable] == ["memories/notes.json"]
    assert report.skipped == () and report.cycles == () and report.unresolved_links == ()
    assert (root / "memories" / "notes.json").read_bytes() == broken
    assert sorted(p.name for p in (root / "memories").iterdir()) == sorted(
        [fact.file_name, insight.file_name, "notes.json", "archive", ".migrated.json"]
    )
    index = json.loads((root / "memories" / ".migrated.json").read_bytes())
    assert index == {
        "ids": {
            FACT_LEGACY: fact.id,
            "5f2c9a40-8d1e-4c6b-b2f7-3e9d1a7c4b20": insight.id,
            "7a1f6c2e-0b9d-4e3a-8f51-2c6d9e0b1a73": pref.id,
        },
        "schema": "migrated/1",
    }
    bank = MemoryBank(root)
    assert bank.get(insight.id) == insight and bank.locate(pref.id).archived
    verified = bank.verify()
    assert [p.path for p in verified.problems] == ["memories/notes.json"]
    assert verified.ledger is not None and verified.ledger["sealed"] == 3
    again = bank.migrate()
    assert again.migrated == 0 and [i.path for i in again.unparseable] == ["memories/notes.json"]
    assert again.to_dict()["files"] == [] and bank.verify().ledger["entries"] == 3  # type: ignore[index]


def test_cycles_keep_legacy_ids_and_dependents_get_new_ids(tmp_path: Path) -> None:
    """A <-> B is a cycle (links between them keep legacy ids, reported); C -> A is rewritten
    to A's new id; D -> D (self-link) is a cycle of one; E -> unknown keeps its link."""
    folder = tmp_path / "memories"
    legacy_file(folder, "a.json", "A", links=["mm://memory/B"])
    legacy_file(folder, "b.json", "B", links=[{"uri": "mm://memory/A", "relation": "refines"}])
    legacy_file(folder, "c.json", "C", links=["mm://memory/A#about"])
    legacy_file(folder, "d.json", "D", links=["mm://memory/D"])
    legacy_file(folder, "e.json", "E", links=["mm://memory/ZZZ"])
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 5
    ids = {f.legacy_id: f.id for f in report.files}
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    assert ids["A"] == Memory("fact", "project", "A", [], ts, None, ["mm://memory/B"]).id
    assert ids["B"] == Memory("fact", "project", "B", [], ts, None, ["mm://memory/A#refines"]).id
    assert (
        ids["C"]
        == Memory("fact", "project", "C", [], ts, None, [f"mm://memory/{ids['A']}#about"]).id
    )
    assert sorted(report.cycles) == [("A", "B"), ("D",)]
    assert sorted((i.path, i.reason) for i in report.unresolved_links) == [
        ("memories/a.json", "mm://memory/B"),
        ("memories/b.json", "mm://memory/A#refines"),
        ("memories/d.json", "mm://memory/D"),
        ("memories/e.json", "mm://memory/ZZZ"),
    ]
    assert MemoryBank(tmp_path).verify().ok


def test_twins_identical_removed_different_kept(tmp_path: Path) -> None:
    """A legacy file whose content-addressed twin exists is removed only if the twin is
    byte-identical; otherwise both stay and the file is reported skipped."""
    folder = tmp_path / "memories"
    same = legacy_file(folder, "same.json", "S", content="same")
    differ = legacy_file(folder, "differ.json", "D", content="differ")
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    twin = Memory("fact", "project", "same", timestamp=ts)
    (folder / twin.file_name).write_bytes(twin.to_bytes())
    other = Memory("fact", "project", "differ", timestamp=ts)
    (folder / other.file_name).write_bytes(b'{"tampered": true}')
    report = MemoryBank(tmp_path).migrate()
    assert [(f.path, f.twin_existed) for f in report.files] == [("memories/same.json", True)]
    assert not same.exists() and differ.exists()
    assert [(i.path, "differs" in i.reason) for i in report.skipped] == [
        (f"memories/{other.file_name}", False),  # not a legacy memory either
        ("memories/differ.json", True),
    ]


def test_crash_after_writing_rerun_finishes_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after phase 1 (new files durable, legacy not removed): the rerun finds the
    identical twins (same link rewriting, since every legacy file is still there), removes
    the legacy files, and writes no second copy."""
    root = sample_bank(tmp_path)

    def crash(*args: object) -> None:
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(MemoryBank, "_remove_legacy", crash)
    with pytest.raises(KeyboardInterrupt):
        MemoryBank(root).migrate()
    monkeypatch.undo()
    report = MemoryBank(root).migrate()
    assert report.migrated == 3 and all(f.twin_existed for f in report.files)
    names = sorted(p.name for p in (root / "memories").iterdir())
    assert len(names) == 5  # two memories, notes.json, archive/, .migrated.json
    verified = MemoryBank(root).verify()
    assert verified.ledger is not None and verified.ledger["sealed"] == 3
    assert verified.ledger["entries"] == 3


def test_files_that_would_lose_data_are_skipped_untouched(tmp_path: Path) -> None:
    """Unknown fields, duplicate legacy ids, invalid types and non-legacy JSON are skipped
    and left byte-for-byte as they were."""
    folder = tmp_path / "memories"
    paths = [
        legacy_file(folder, "extra.json", "X", core_type="axiom"),
        legacy_file(folder, "dup1.json", "Y"),
        legacy_file(folder, "dup2.json", "Y", content="other"),
        legacy_file(folder, "badtype.json", "Z", type="FACT/../x"),
        legacy_file(folder, "badlink.json", "W", links=[{"uri": "x:y", "weight": 2}]),
    ]
    (folder / "list.json").write_text("[1, 2]")
    (folder / "readme.md").write_text("# notes")
    before = {p: p.read_bytes() for p in paths}
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 0
    reasons = {i.path: i.reason for i in report.skipped}
    assert sorted(reasons) == sorted(
        [f"memories/{p.name}" for p in paths] + ["memories/list.json", "memories/readme.md"]
    )
    assert "unknown fields (core_type)" in reasons["memories/extra.json"]
    assert "also used by memories/dup2.json" in reasons["memories/dup1.json"]
    assert "slug" in reasons["memories/badtype.json"]
    assert all(p.read_bytes() == data for p, data in before.items())


def test_yaml_legacy_files_with_and_without_pyyaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without PyYAML a .yaml file is skipped with the reason; with it, it is migrated (a
    YAML timestamp that parses to a naive datetime is read as UTC)."""
    folder = tmp_path / "memories"
    folder.mkdir(parents=True)
    text = (
        "id: 3f9a\ntype: decision\nscope: project\ncontent: 'use sqlite'\n"
        "tags: [db]\ntimestamp: 2026-02-03T04:05:06\nstatus: active\n"
    )
    (folder / "old.yaml").write_text(text)
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 0
    assert [(i.path, "PyYAML" in i.reason) for i in report.skipped] == [("memories/old.yaml", True)]
    monkeypatch.undo()
    pytest.importorskip("yaml")
    report = MemoryBank(tmp_path).migrate()
    expected = Memory(
        "decision", "project", "use sqlite", ["db"], datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
    )
    assert [(f.id, f.naive_timestamp) for f in report.files] == [(expected.id, True)]
    (folder / "bad.yml").write_text("key: [unclosed\n")
    assert [i.path for i in MemoryBank(tmp_path).migrate().unparseable] == ["memories/bad.yml"]


def _naive_cyclic(nodes: list[str], edges: dict[str, list[str]]) -> set[str]:
    """Nodes that reach themselves through at least one edge (plain DFS)."""
    out = set()
    for start in nodes:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            node = todo.pop()
            if node == start:
                out.add(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(edges[node])
    return out


def _reach(edges: dict[str, list[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@given(
    st.integers(1, 9).flatmap(
        lambda n: st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20
        ).map(lambda pairs: (n, pairs))
    )
)
@settings(max_examples=100, deadline=None)
def test_tarjan_components_match_a_naive_reference(
    graph: tuple[int, list[tuple[int, int]]],
) -> None:
    """_sccs gives the mutual-reachability classes, each after every class it reaches."""
    n, pairs = graph
    nodes = [f"n{i}" for i in range(n)]
    edges: dict[str, list[str]] = {v: [] for v in nodes}
    for a, b in pairs:
        edges[f"n{a}"].append(f"n{b}")
    components = _migrate._sccs(nodes, edges)
    assert sorted(v for c in components for v in c) == nodes
    reach = {v: _reach(edges, v) for v in nodes}
    where = {v: i for i, c in enumerate(components) for v in c}
    for u in nodes:
        for v in nodes:
            same = v in reach[u] and u in reach[v]
            assert (where[u] == where[v]) == same
    for u in nodes:
        for v in edges[u]:
            assert where[v] <= where[u]  # targets first
    cyclic = {v for c in components for v in c if len(c) > 1 or v in edges[v]}
    assert cyclic == _naive_cyclic(nodes, edges)


def test_long_link_chain_does_not_recurse() -> None:
    """A chain of 3000 links is ordered (targets first) without recursion."""
    nodes = [f"n{i}" for i in range(3000)]
    edges = {v: ([nodes[i + 1]] if i + 1 < len(nodes) else []) for i, v in enumerate(nodes)}
    components = _migrate._sccs(nodes, edges)
    assert [c[0] for c in components] == nodes[::-1]
