"""`merkle-memory bank`: add twice, id prefixes, --json everywhere, legacy files (issue 16
items 4, 5 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import legacy_bank, run_main

from merkle_memory.bank import MemoryBank
from merkle_memory.cli import build_parser

PYTEST = ["--type", "fact", "--scope", "project", "--content", "Tests use pytest"]


def test_adding_the_same_memory_twice_prints_the_same_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `bank add ... "Tests use pytest"` twice (no --timestamp) prints the
    same id, writes nothing the second time and says so on stderr (not with -q)."""
    bank = tmp_path / "bank"
    code, first, err = run_main(capsys, "bank", "add", str(bank), *PYTEST)
    assert (code, err) == (0, "")
    lines = (bank / "ledger.jsonl").read_bytes()
    code, second, err = run_main(capsys, "bank", "add", str(bank), *PYTEST)
    stored = MemoryBank(bank).locate(first.strip())
    assert (code, second) == (0, first)
    assert err == f"already in the bank (active): {stored.path}\n"
    assert (bank / "ledger.jsonl").read_bytes() == lines
    assert len(list((bank / "memories").glob("*.json"))) == 1
    assert run_main(capsys, "bank", "add", str(bank), *PYTEST, "-q") == (0, first, "")


def test_add_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """add --json: `{id, created, status, file}`, created true then false."""
    bank = tmp_path / "bank"
    code, out, _err = run_main(capsys, "bank", "add", str(bank), *PYTEST, "--json")
    document = json.loads(out)
    stored = MemoryBank(bank).locate(document["id"])
    assert (code, document) == (
        0,
        {"id": stored.memory.id, "created": True, "status": "active", "file": stored.path},
    )
    code, out, _err = run_main(capsys, "bank", "add", str(bank), *PYTEST, "--json", "-q")
    assert json.loads(out) == {**document, "created": False}


def test_archive_and_consolidate_take_unique_prefixes_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """archive and consolidate accept an id prefix (as dag show does) and print JSON."""
    bank = tmp_path / "bank"
    ids = []
    for text in ("one", "two", "three"):
        argv = ["--type", "fact", "--scope", "p", "--content", text]
        ids.append(run_main(capsys, "bank", "add", str(bank), *argv)[1].strip())
    code, out, _err = run_main(capsys, "bank", "archive", str(bank), ids[0][:5], "--json")
    archived = MemoryBank(bank).locate(ids[0])
    assert (code, json.loads(out)) == (
        0,
        {"id": ids[0], "status": "archived", "file": archived.path},
    )
    assert archived.path.startswith("memories/archive/")
    code, out, _err = run_main(capsys, "bank", "archive", str(bank), ids[1][:8].upper())
    assert (code, out) == (0, MemoryBank(bank).locate(ids[1]).path + "\n")
    argv = ["bank", "consolidate", str(bank), ids[1][:4], ids[2][:6], "--content", "both"]
    code, out, _err = run_main(capsys, *argv, "--json")
    document = json.loads(out)
    found = MemoryBank(bank)
    assert code == 0
    assert document == {
        "id": document["id"],
        "file": found.locate(document["id"]).path,
        "originals": [
            {"id": mid, "file": found.locate(mid).path} for mid in sorted([ids[1], ids[2]])
        ],
    }
    assert found.get(document["id"]).links == tuple(
        f"mm://memory/{mid}" for mid in sorted([ids[1], ids[2]])
    )


def test_unknown_and_malformed_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A prefix of no memory: exit 1 `no memory ...`; a malformed one: exit 2 with the
    subcommand's usage."""
    bank = tmp_path / "bank"
    run_main(capsys, "bank", "add", str(bank), *PYTEST)
    unknown = "0000" if not any(p.name[-69:-65] == "0000" for p in bank.rglob("*.json")) else "ffff"
    code, out, err = run_main(capsys, "bank", "archive", str(bank), unknown)
    assert (code, out, err) == (1, "", f"error: no memory {unknown} in {bank}\n")
    code, out, err = run_main(capsys, "bank", "archive", str(bank), "12")
    assert (code, out) == (2, "")
    assert err.startswith("usage: merkle-memory bank archive ")
    assert err.endswith("error: argument ID: not a hash or a hash prefix (4-64 hex digits): '12'\n")


def test_every_bank_command_has_json() -> None:
    """--json is accepted by every bank subcommand."""
    parser = build_parser()
    for argv in (
        ["bank", "add", "B", *PYTEST],
        ["bank", "list", "B"],
        ["bank", "verify", "B"],
        ["bank", "archive", "B", "abcd"],
        ["bank", "consolidate", "B", "abcd", "--content", "c"],
        ["bank", "migrate", "B"],
        ["bank", "seal", "B"],
    ):
        assert parser.parse_args([*argv, "--json"]).json is True, argv


def test_verify_calls_legacy_files_legacy_and_names_migrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The legacy sample store: LEGACY lines (not TAMPERED ... missing keys: schema), and the
    error line says to run `bank migrate`; after it the bank verifies."""
    bank = legacy_bank(tmp_path)
    (bank / "memories" / "notes.json").unlink()  # the one unparseable file
    code, out, err = run_main(capsys, "bank", "verify", str(bank))
    assert code == 1
    assert out.splitlines()[0] == (
        "LEGACY memories/0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11.json: a legacy memory file "
        "(legacy id '0b0e7d3e-1c2a-4f4e-9a51-6f1f0c7e2a11'), not content-addressed yet: "
        "migrate it (`merkle-memory bank migrate`, MemoryBank.migrate)"
    )
    assert [line.split(" ", 1)[0] for line in out.splitlines()] == ["LEGACY"] * 3 + ["FAILED:"]
    assert "TAMPERED" not in out and "missing keys" not in out
    assert err == (
        "error: bank failed verification: 3 file(s) do not verify (3 legacy: run "
        f"`merkle-memory bank migrate {bank}`)\n"
    )
    code, out, _err = run_main(capsys, "bank", "verify", str(bank), "--json")
    assert [p["kind"] for p in json.loads(out)["problems"]] == ["legacy"] * 3
    assert run_main(capsys, "bank", "migrate", str(bank), "-q")[0] == 0
    assert run_main(capsys, "bank", "verify", str(bank), "-q")[0] == 0
