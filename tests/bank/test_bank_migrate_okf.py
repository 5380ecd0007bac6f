"""Tests of MemoryBank.migrate on Tur's OKF markdown memories (merkle_memory.bank._okf).

Tur (erivlis/tur) writes ``memories/{active,archive,subsumed}/<ts>_<type>_<sha256>.md``: YAML
front matter, a blank line, the content and a newline. The vector ``bank/tur_head_okf`` was
written by Tur's own code; the other files here are written by :func:`tur_file`, a naive
re-statement of Tur's writer and of its hash formula (research/tur.md section 1).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import asset_path, run_main

from merkle_memory.bank import MemoryBank
from merkle_memory.bank._okf import split_okf, tur_payloads
from merkle_memory.bank.memory import Memory

yaml = pytest.importorskip("yaml")

TUR_ACTIVE_FACT = "52d4ae07c891ff3dd224c606d660b00a5f1a38c56c70e703c736d5d8301e0dcd"
TUR_ARCHIVED_PREF = "7f250b98104c97e9382c983d35f4b5eb9d92286664d4201f88bc9fd7d9fe5c26"
TUR_SUBSUMED_EVENT = "96878aa14c402787f986042d0a231238e44fbf0850b60d51920bddef746514b1"
TUR_ACTIVE_FACT2 = "e7af97ae8d90dfd8b7b4956942b66e81c42d2667a08c68c22d46a58d6ae0b0a0"


def tur_bank(tmp_path: Path) -> Path:
    """A writable copy of the Tur-written bank ``tests/assets/bank/tur_head_okf``."""
    target = tmp_path / "tur"
    shutil.copytree(asset_path("bank", "tur_head_okf"), target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def naive_tur_hash(fields: dict[str, Any], era: int = 11) -> str:
    """Tur's id, written out field by field (7 fields at f997ebf, 11 from EP-0113, 13 from
    EP-0131 with confidence 1.0 and no provenance)."""
    links = sorted(fields.get("links", []), key=lambda link: link["uri"])
    parts = [
        fields["timestamp"],
        fields["memory_type"].lower(),
        fields["scope"].lower(),
        ",".join(sorted(fields.get("tags", []))),
        fields["content"],
        str([{"uri": link["uri"], "relation": link.get("relation")} for link in links]),
        fields.get("source_session") or "",
    ]
    if era >= 11:
        parts += ["", "", "", fields.get("status", "active") or ""]
    if era >= 13:
        parts += ["1.0", ""]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()


def tur_file(
    folder: Path, *, era: int = 11, hashed: dict[str, Any] | None = None, **given: Any
) -> Path:
    """Write one memory as Tur's ``MemoryManager.save`` does and return its path.

    ``given`` overrides the front matter fields (``content`` is the body); a key set to
    ``None`` is left out of the front matter. ``hashed`` overrides fields in the hash only.
    """
    fields: dict[str, Any] = {
        "timestamp": "2026-05-29T12:00:00",
        "memory_type": "FACT",
        "scope": "INCARNATION",
        "tags": ["cli"],
        "content": "Project uses FastAPI",
        "status": "active",
        **given,
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    digest = naive_tur_hash({**fields, **(hashed or {})}, era)
    front: dict[str, Any] = {
        "type": "L1 Memory",
        "title": f"Memory {digest[:8]}",
        "description": fields["content"].splitlines()[0][:100] if fields["content"] else "",
        "tags": fields["tags"],
        "timestamp": fields["timestamp"],
        "scope": fields["scope"],
        "memory_type": fields["memory_type"],
        "hash": digest,
    }
    front.update({k: v for k, v in fields.items() if k not in front and k != "content"})
    stamp = datetime.fromisoformat(fields["timestamp"]).strftime("%Y%m%d_%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}_{fields['memory_type'].lower()}_{digest}.md"
    text = f"---\n{yaml.dump(front, sort_keys=False, default_flow_style=False)}---\n\n"
    path.write_bytes(f"{text}{fields['content']}\n".encode())
    return path


def _at(hour: int, minute: int) -> datetime:
    return datetime(2026, 5, 29, hour, minute, tzinfo=UTC)


# --- the vector written by Tur's own code ----------------------------------------------------


def test_tur_head_bank_migrates_all_four_then_nothing_and_verifies(tmp_path: Path) -> None:
    """The Tur-written bank: 4 migrated with exact ids (content byte-exact, including the
    preference's surrounding whitespace Tur's own verify trips on), active/ -> memories/,
    archive/ and subsumed/ -> memories/archive/ (legacy status 'subsumed' reported), Tur's
    emptied folders removed; a second run migrates 0; verify is ok."""
    root = tur_bank(tmp_path)
    report = MemoryBank(root).migrate()
    fact = Memory("fact", "incarnation", "Project uses FastAPI", ["cli"], _at(12, 0))
    pref = Memory(
        "preference", "incarnation", "  Prefers tabs over spaces\n", ["style"], _at(12, 1)
    )
    event = Memory("event", "incarnation", "Chose SQLite for the node store", [], _at(12, 2))
    fact2 = Memory("fact", "incarnation", "Tests run with pytest -q", ["ci", "tests"], _at(12, 3))
    assert [m.id for m in (fact, pref, event, fact2)] == [
        "423fc8931a2aaa9c7b13c7a0ce1d573d51b32d210d0bbdc15aca568683a771ec",
        "eee417cde7f88e0bda56b83e0194939248ffab1ba5d35cfc96910e352a84c7c3",
        "03e82d15cc747fba0fb85e1083d84606ddf5060f8ba2b2f8a1bfa65cb525b31f",
        "994f837fcb2e5dead82263708ed3b39d4f6fa4c055e1df9018cb80450b2a3804",
    ]
    rows = [(f.path, f.new_path, f.legacy_id, f.id, f.status, f.new_status) for f in report.files]
    assert rows == [
        (
            f"memories/active/20260529_120000_fact_{TUR_ACTIVE_FACT}.md",
            f"memories/{fact.file_name}",
            TUR_ACTIVE_FACT,
            fact.id,
            "active",
            "active",
        ),
        (
            f"memories/active/20260529_120300_fact_{TUR_ACTIVE_FACT2}.md",
            f"memories/{fact2.file_name}",
            TUR_ACTIVE_FACT2,
            fact2.id,
            "active",
            "active",
        ),
        (
            f"memories/archive/20260529_120100_preference_{TUR_ARCHIVED_PREF}.md",
            f"memories/archive/{pref.file_name}",
            TUR_ARCHIVED_PREF,
            pref.id,
            "archived",
            "archived",
        ),
        (
            f"memories/subsumed/20260529_120200_event_{TUR_SUBSUMED_EVENT}.md",
            f"memories/archive/{event.file_name}",
            TUR_SUBSUMED_EVENT,
            event.id,
            "subsumed",
            "archived",
        ),
    ]
    assert report.migrated == 4
    assert (report.skipped, report.unparseable, report.unresolved_links) == ((), (), ())
    assert len(report.naive_timestamps) == 4
    assert sorted(p.name for p in (root / "memories").iterdir()) == sorted(
        [".migrated.json", "archive", fact.file_name, fact2.file_name]
    )
    stored = (root / "memories" / "archive" / pref.file_name).read_bytes()
    assert stored == pref.to_bytes()
    assert MemoryBank(root).get(pref.id).content == "  Prefers tabs over spaces\n"
    again = MemoryBank(root).migrate()
    assert (again.migrated, again.skipped, again.unparseable) == (0, (), ())
    verified = MemoryBank(root).verify()
    assert (verified.ok, verified.active, verified.archived) == (True, 2, 2)


def test_cli_migrate_then_verify_on_the_tur_bank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bank migrate` then `bank verify` on a copy of the Tur bank: exit 0 both, the text
    report names the subsumed file's legacy status, the second migrate says 0."""
    root = tur_bank(tmp_path)
    code, out, err = run_main(capsys, "bank", "migrate", str(root))
    assert code == 0
    assert err.endswith("migrated 4 file(s)\n")
    event = Memory("event", "incarnation", "Chose SQLite for the node store", [], _at(12, 2))
    assert (
        f"memories/subsumed/20260529_120200_event_{TUR_SUBSUMED_EVENT}.md -> "
        f"memories/archive/{event.file_name} (archived; legacy status 'subsumed')\n"
    ) in out
    assert run_main(capsys, "bank", "migrate", str(root)) == (0, "", "migrated 0 file(s)\n")
    assert run_main(capsys, "bank", "verify", str(root))[0] == 0


# --- Tur's hash formula ------------------------------------------------------------------------


def test_tur_payloads_reproduce_the_worked_examples_of_research() -> None:
    """research/tur.md's two worked examples (computed by running Tur's HEAD code): the
    11-field payloads and ids are among tur_payloads' candidates, in second place."""
    first = tur_payloads(
        timestamp="2026-05-29T12:00:00",
        memory_type="fact",
        scope="incarnation",
        tags=["manual", "cli"],
        content="Project uses FastAPI",
        links=[],
        source_session="session_123",
        status="active",
    )
    assert first[1] == (
        "2026-05-29T12:00:00|fact|incarnation|cli,manual|Project uses FastAPI|[]|"
        "session_123||||active"
    )
    assert hashlib.sha256(first[1].encode()).hexdigest() == (
        "2864f7070088644bf6a34a5e28517f95172ba49788667979337c5a6621896ef7"
    )
    second = tur_payloads(
        timestamp="2026-05-29T12:00:00",
        memory_type="insight",
        scope="incarnation",
        tags=["b", "a"],
        content="C",
        links=[("tur://memory/bbb", "supports"), ("tur://memory/aaa", None)],
        source_session=None,
        status="active",
    )
    assert second[1] == (
        "2026-05-29T12:00:00|insight|incarnation|a,b|C|[{'uri': 'tur://memory/aaa', "
        "'relation': None}, {'uri': 'tur://memory/bbb', 'relation': 'supports'}]|||||active"
    )
    assert hashlib.sha256(second[1].encode()).hexdigest() == (
        "311fed72334d7f8841f5b7b68f668f9daf8d7dd29361b34324a8c8358a08f437"
    )
    assert len(first) == 3
    assert first[0] + "||||active|1.0|" == first[2]


@pytest.mark.parametrize("era", [7, 11, 13])
def test_each_era_of_turs_hash_is_accepted(tmp_path: Path, era: int) -> None:
    """A file whose hash is Tur's 7-, 11- or 13-field formula migrates to the same memory."""
    tur_file(tmp_path / "memories" / "active", era=era)
    report = MemoryBank(tmp_path).migrate()
    expected = Memory("fact", "incarnation", "Project uses FastAPI", ["cli"], _at(12, 0))
    assert [f.id for f in report.files] == [expected.id]


def test_a_missing_status_was_hashed_as_active_or_empty(tmp_path: Path) -> None:
    """No status in the front matter: Tur's hash used 'active' (its default) or '' (saved
    with none); both migrate, as active."""
    folder = tmp_path / "memories" / "active"
    tur_file(folder, status=None, content="one")
    tur_file(folder, status=None, hashed={"status": ""}, content="two")
    report = MemoryBank(tmp_path).migrate()
    one = Memory("fact", "incarnation", "one", ["cli"], _at(12, 0))
    two = Memory("fact", "incarnation", "two", ["cli"], _at(12, 0))
    assert sorted((f.id, f.status, f.new_status) for f in report.files) == sorted(
        [(one.id, None, "active"), (two.id, None, "active")]
    )


# --- files that are skipped or unparseable, left untouched -----------------------------------


def test_files_that_cannot_be_migrated_are_reported_and_left_untouched(tmp_path: Path) -> None:
    """Each file is reported with its reason and keeps its bytes: content altered after Tur
    wrote it, a renamed file, Tur core fields (would be lost), an OKF concept (not an L1
    memory), an unknown status in active/, no front matter, no blank line before the
    content; a .md file directly in memories/ is not Tur's layout."""
    active = tmp_path / "memories" / "active"
    altered = tur_file(active, content="original")
    altered.write_bytes(altered.read_bytes().replace(b"original", b"rewritten"))
    renamed = tur_file(active, content="renamed")
    renamed = renamed.rename(active / "20260529_120000_fact_renamed.md")
    core = tur_file(active, content="core", core_type="identity_transition").name
    concept = active / "concept.md"
    concept.write_text("---\ntype: L2 Concept\ntitle: x\n---\n\nbody\n")
    tur_file(active, content="odd status", status="draft")
    (active / "plain.md").write_text("no front matter\n")
    (active / "tight.md").write_text("---\ntype: L1 Memory\n---\nbody\n")
    (tmp_path / "memories" / "loose.md").write_text("---\n---\n\nx\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.md")}
    report = MemoryBank(tmp_path).migrate()
    assert report.migrated == 0
    skipped = {i.path.rsplit("/", 1)[1]: i.reason for i in report.skipped}
    unparseable = {i.path.rsplit("/", 1)[1]: i.reason for i in report.unparseable}
    assert "does not match the front matter and content" in skipped[altered.name]
    assert skipped[renamed.name].startswith("file name does not end in _<hash>.md")
    assert skipped[core] == "unknown fields (core_type); migrating would lose them"
    assert skipped["concept.md"] == "an OKF file of type 'L2 Concept', not L1 Memory"
    draft = [n for n, r in skipped.items() if "unknown legacy status 'draft'" in r]
    assert len(draft) == 1
    assert skipped["loose.md"].startswith("not a legacy memory file")
    assert unparseable == {
        "plain.md": "unparseable: not OKF: the file does not start with a '---' line",
        "tight.md": "unparseable: not OKF as Tur writes it: expected a blank line after the "
        "front matter and a newline at the end",
    }
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.md")} == before
    assert active.is_dir()  # not empty: Tur's folder stays


def test_core_fields_name_the_skip(tmp_path: Path) -> None:
    """The core-memory file of the previous test, alone: skipped with its field named."""
    path = tur_file(tmp_path / "memories" / "active", content="c", core_type="x")
    report = MemoryBank(tmp_path).migrate()
    assert [(i.path, i.reason) for i in report.skipped] == [
        (
            f"memories/active/{path.name}",
            "unknown fields (core_type); migrating would lose them",
        )
    ]


def test_without_pyyaml_okf_files_are_skipped_with_the_extra_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML missing: every .md file is skipped with the reason naming the yaml extra; the
    folders stay; with PyYAML the same bank migrates."""
    root = tur_bank(tmp_path)
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    report = MemoryBank(root).migrate()
    assert report.migrated == 0
    assert {i.reason for i in report.skipped} == {
        "YAML needs PyYAML (install the extra merkle_memory[yaml])"
    }
    assert len(report.skipped) == 4
    assert (root / "memories" / "subsumed").is_dir()
    monkeypatch.undo()
    assert MemoryBank(root).migrate().migrated == 4


def test_front_matter_status_places_a_file_of_active(tmp_path: Path) -> None:
    """In active/ the front matter's status decides as for a legacy file in memories/
    (superseded -> archive, pending_approval -> active); in archive/ and subsumed/ the
    folder decides whatever the status."""
    tur_file(tmp_path / "memories" / "active", content="old", status="superseded")
    tur_file(tmp_path / "memories" / "active", content="new", status="pending_approval")
    tur_file(tmp_path / "memories" / "subsumed", content="sub", status="pending_approval")
    report = MemoryBank(tmp_path).migrate()
    placed = sorted((f.status, f.new_status) for f in report.files)
    assert placed == [
        ("pending_approval", "active"),
        ("subsumed", "archived"),
        ("superseded", "archived"),
    ]
    assert not (tmp_path / "memories" / "active").exists()
    assert not (tmp_path / "memories" / "subsumed").exists()


def test_a_symlinked_tur_folder_is_reported_never_followed(tmp_path: Path) -> None:
    """memories/active as a symlink to a folder of Tur files: reported, nothing read."""
    outside = tmp_path / "outside"
    tur_file(outside)
    (tmp_path / "bank" / "memories").mkdir(parents=True)
    (tmp_path / "bank" / "memories" / "active").symlink_to(outside)
    report = MemoryBank(tmp_path / "bank").migrate()
    assert [(i.path, i.reason) for i in report.skipped] == [
        ("memories/active", "refusing to follow the symlink memories/active/")
    ]
    assert report.migrated == 0


# --- links ---------------------------------------------------------------------------------


def test_tur_memory_links_are_resolved_to_new_ids(tmp_path: Path) -> None:
    """B links tur://memory/<A's Tur hash> (relation refines): B's new link is
    mm://memory/<A's new id>#refines; a tur:// link to a memory not in the bank is kept and
    listed unresolved; an https link with a null relation is kept as the bare URI."""
    active = tmp_path / "memories" / "active"
    a_path = tur_file(active, content="A")
    a_hash = a_path.name.rsplit("_", 1)[1].removesuffix(".md")
    missing = "tur://memory/" + "ab" * 32
    tur_file(
        active,
        content="B",
        timestamp="2026-05-29T12:05:00",
        links=[
            {"uri": f"tur://memory/{a_hash}", "relation": "refines"},
            {"uri": missing, "relation": None},
            {"uri": "https://example.org/guide", "relation": None},
        ],
    )
    report = MemoryBank(tmp_path).migrate()
    a = Memory("fact", "incarnation", "A", ["cli"], _at(12, 0))
    b = Memory(
        "fact",
        "incarnation",
        "B",
        ["cli"],
        _at(12, 5),
        None,
        [f"mm://memory/{a.id}#refines", missing, "https://example.org/guide"],
    )
    assert sorted(f.id for f in report.files) == sorted([a.id, b.id])
    assert [(i.path.endswith(".md"), i.reason) for i in report.unresolved_links] == [
        (True, missing)
    ]


# --- properties ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=st.text(st.characters(blacklist_categories=("Cs",)), max_size=60),
    tags=st.lists(st.text("abc-_ ", min_size=1, max_size=4), max_size=3),
)
def test_any_content_migrates_byte_exact(content: str, tags: list[str]) -> None:
    """Whatever the content (whitespace around it, '---' lines, CR, NUL, astral characters),
    the migrated memory holds it byte-exact and Tur's hash is recognised. A fresh folder per
    example (tempfile, not pytest's function-scoped tmp_path)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = tur_file(Path(tmp) / "memories" / "active", content=content, tags=tags)
        assert split_okf(path.read_bytes())[1] == content
        report = MemoryBank(tmp).migrate()
        expected = Memory("fact", "incarnation", content, tags, _at(12, 0))
        assert [f.id for f in report.files] == [expected.id]
        assert MemoryBank(tmp).get(expected.id).content == content
