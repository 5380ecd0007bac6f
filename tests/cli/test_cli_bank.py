"""Tests of ``merkle-memory bank ...`` (in-process through main, plus one subprocess run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import T0, ledger_report, legacy_bank, run_main

from merkle_memory.bank.memory import Memory

REPO = Path(__file__).resolve().parents[2]
TS = "2026-05-29T14:00:00+02:00"


def add(capsys: pytest.CaptureFixture[str], bank: Path, content: str, *extra: str) -> str:
    """`bank add` one memory at TS; return the printed id."""
    code, out, err = run_main(
        capsys,
        "bank",
        "add",
        str(bank),
        "--type",
        "fact",
        "--scope",
        "project",
        "--content",
        content,
        "--timestamp",
        TS,
        *extra,
    )
    assert (code, err) == (0, "")
    return out.strip()


def test_add_prints_the_id_and_list_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """add prints exactly the id (tags, links, source session included); list --json shows
    the file object plus status and file."""
    bank = tmp_path / "bank"
    printed = add(
        capsys, bank, " x ", "--tag", "b", "--tag", "a", "--link", "urn:x:1", "--source-session", ""
    )
    expected = Memory("fact", "project", " x ", ["a", "b"], T0, "", ["urn:x:1"])
    assert printed == expected.id
    code, out, err = run_main(capsys, "bank", "list", str(bank), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "memories": [
            {**expected.to_dict(), "status": "active", "file": f"memories/{expected.file_name}"}
        ],
        "skipped": [],
    }
    code, out, _ = run_main(capsys, "bank", "list", str(bank))
    assert code == 0 and out.startswith(expected.id + "  active    2026-05-29T12:00:00.000000Z")


def test_verify_archive_consolidate_flow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify exits 0, archive prints the archived path, consolidate prints the new id, list
    --archived and --all filter; verify exits 1 naming a tampered file."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    b = add(capsys, bank, "b")
    code, out, _ = run_main(capsys, "bank", "verify", str(bank))
    assert code == 0 and out.startswith("ok: 2 active, 0 archived; ledger chain intact")
    code, out, _ = run_main(capsys, "bank", "archive", str(bank), a)
    assert code == 0 and out.strip().startswith("memories/archive/20260529_120000_fact_" + a)
    code, out, _ = run_main(
        capsys, "bank", "consolidate", str(bank), a, b, "--content", "a+b", "--type", "insight"
    )
    assert code == 0
    new_id = out.strip()
    assert len(new_id) == 64
    code, out, _ = run_main(capsys, "bank", "list", str(bank), "--archived", "--json")
    assert sorted(m["id"] for m in json.loads(out)["memories"]) == sorted([a, b])
    code, out, _ = run_main(capsys, "bank", "list", str(bank), "--all", "--json")
    listed = json.loads(out)["memories"]
    assert [m["id"] for m in listed if m["status"] == "active"] == [new_id]
    links = next(m["links"] for m in listed if m["id"] == new_id)
    assert links == sorted([f"mm://memory/{a}", f"mm://memory/{b}"])
    code, out, _ = run_main(capsys, "bank", "verify", str(bank), "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and (report["active"], report["archived"]) == (1, 2)
    assert set(report) == {"ok", "active", "archived", "problems", "leftovers", "ledger"}
    assert report["ledger"]["sealed"] == 3
    victim = next((bank / "memories").glob(f"*_{new_id}.json"))
    victim.chmod(0o644)
    victim.write_text(victim.read_text().replace("a+b", "a+c"))
    code, out, _ = run_main(capsys, "bank", "verify", str(bank))
    assert code == 1
    assert f"TAMPERED memories/{victim.name}: content does not match id" in out
    assert "FAILED" in out and f"altered: {new_id}" in out
    code, out, _ = run_main(capsys, "bank", "verify", str(bank), "--json")
    assert code == 1 and json.loads(out)["problems"][0]["kind"] == "content_mismatch"
    code, out, err = run_main(capsys, "bank", "list", str(bank))
    assert code == 0 and out == "" and "1 file(s) do not verify" in err


def test_errors_exit_one_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input exits 1 with one `error:` line; usage errors exit 2."""
    bank = tmp_path / "bank"
    cases = [
        ("bank", "add", str(bank), "--type", "Fact", "--scope", "p", "--content", "x"),
        (
            "bank",
            "add",
            str(bank),
            "--type",
            "f",
            "--scope",
            "p",
            "--content",
            "x",
            "--timestamp",
            "2026-01-01T00:00:00",
        ),
        (
            "bank",
            "add",
            str(bank),
            "--type",
            "f",
            "--scope",
            "p",
            "--content",
            "x",
            "--link",
            "not a uri",
        ),
        ("bank", "verify", str(tmp_path / "absent")),
        ("bank", "archive", str(bank), "a" * 64),
        ("bank", "consolidate", str(bank), "b" * 64, "--content", "x"),
    ]
    for argv in cases:
        code, out, err = run_main(capsys, *argv)
        assert code == 1, argv
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    code, _, _ = run_main(capsys, "bank", "add", str(bank), "--type", "fact")
    assert code == 2
    code, _, err = run_main(capsys, "bank", "archive", str(bank), "../x")  # not an id: usage
    assert code == 2 and err.endswith(
        "argument ID: not a hash or a hash prefix (4-64 hex digits): '../x'\n"
    )
    code, _, _ = run_main(capsys, "bank", "list", str(bank), "--archived", "--all")
    assert code == 2


def test_migrate_json_and_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """migrate --json reports the sample store; the unparseable file and the naive timestamp
    are named on stderr; a second run migrates 0."""
    bank = legacy_bank(tmp_path)
    code, out, err = run_main(capsys, "bank", "migrate", str(bank), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["migrated"] == 3 and len(report["files"]) == 3
    assert set(report) == {
        "migrated",
        "files",
        "unparseable",
        "skipped",
        "naive_timestamps",
        "cycles",
        "unresolved_links",
    }
    assert "unparseable (left untouched): memories/notes.json" in err
    assert "naive timestamp read as UTC: memories/0b0e7d3e" in err
    code, out, err = run_main(capsys, "bank", "migrate", str(bank))
    assert code == 0 and out == "" and "migrated 0 file(s)" in err


def test_hostile_text_is_escaped_in_human_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control characters in content and file names never reach the terminal raw."""
    bank = tmp_path / "bank"
    add(capsys, bank, "red\x1b[31m\x9b")
    (bank / "memories" / "evil\x1b]0;x\x07.json").write_text("x")
    _, out, _ = run_main(capsys, "bank", "list", str(bank))
    assert "\x1b" not in out and "\\x1b[31m\\x9b" in out
    code, out, _ = run_main(capsys, "bank", "verify", str(bank))
    assert code == 1 and "\x1b" not in out and "\x07" not in out
    assert "TAMPERED memories/evil\\x1b]0;x\\x07.json" in out


def test_subprocess_python_m(tmp_path: Path) -> None:
    """`python -m merkle_memory bank add/verify` works as a program with its exit codes."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bank = tmp_path / "bank"
    argv = [sys.executable, "-m", "merkle_memory", "bank"]
    added = subprocess.run(
        [
            *argv,
            "add",
            str(bank),
            "--type",
            "fact",
            "--scope",
            "p",
            "--content",
            "x",
            "--timestamp",
            TS,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert added.returncode == 0 and added.stderr == ""
    assert added.stdout.strip() == Memory("fact", "p", "x", timestamp=T0).id
    checked = subprocess.run(
        [*argv, "verify", str(bank), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True


def _break_first_line(bank: Path) -> None:
    """Change the op of ledger line 1 so its hash no longer matches (chain broken at 1)."""
    path = bank / "ledger.jsonl"
    first, rest = path.read_bytes().split(b"\n", 1)
    path.write_bytes(first.replace(b'"op":"save"', b'"op":"adopt"') + b"\n" + rest)


def test_verify_json_reports_the_chain_and_archived_memories_are_not_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --json carries the exact ledger report: after an archive the chain is intact
    and nothing is missing; a broken line makes it `broken` at seq 1 and exits 1."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    b = add(capsys, bank, "b", "--tag", "t")
    assert run_main(capsys, "bank", "archive", str(bank), a)[0] == 0
    code, out, _ = run_main(capsys, "bank", "verify", str(bank), "--json")
    report = json.loads(out)
    assert code == 0 and (report["active"], report["archived"]) == (1, 1)
    assert report["ledger"] == ledger_report(entries=2, sealed=2)
    _break_first_line(bank)
    code, out, _ = run_main(capsys, "bank", "verify", str(bank), "--json")
    assert code == 1
    assert json.loads(out)["ledger"] == ledger_report(
        ok=False,
        chain="broken",
        entries=2,
        broken_at=1,
        reason="entry hash does not match its contents",
        disputed=sorted([a, b]),
    )
    code, out, _ = run_main(capsys, "bank", "verify", str(bank))
    assert code == 1 and "ledger chain broken at seq 1: entry hash does not match" in out


def test_seal_prints_adopted_ids_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """seal prints each adopted id on stdout (summary on stderr); --json is the exact
    {sealed_now, sealed_ids, ledger} document; a second seal adopts nothing."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    stray = Memory("fact", "project", "left unsealed", timestamp=T0)
    (bank / "memories" / stray.file_name).write_bytes(stray.to_bytes())
    code, out, err = run_main(capsys, "bank", "seal", str(bank))
    assert (code, out) == (0, stray.id + "\n")
    assert err == "sealed 1 now; ledger chain intact\n"
    code, out, err = run_main(capsys, "bank", "seal", str(bank), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "sealed_now": 0,
        "sealed_ids": [],
        "ledger": ledger_report(entries=2, sealed=2),
    }
    lines = (bank / "ledger.jsonl").read_text().splitlines()
    assert [(json.loads(x)["op"], json.loads(x)["memory_id"]) for x in lines] == [
        ("save", a),
        ("adopt", stray.id),
    ]


def test_seal_refused_on_a_broken_chain_exits_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a broken chain seal exits 1 with one error line; --json still prints the report
    that found the break, with the error; nothing is appended."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    stray = Memory("fact", "project", "left unsealed", timestamp=T0)
    (bank / "memories" / stray.file_name).write_bytes(stray.to_bytes())
    _break_first_line(bank)
    before = (bank / "ledger.jsonl").read_bytes()
    code, out, err = run_main(capsys, "bank", "seal", str(bank))
    assert code == 1 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "refusing to adopt" in err
    code, out, err = run_main(capsys, "bank", "seal", str(bank), "--json")
    document = json.loads(out)
    assert code == 1 and "refusing to adopt" in document.pop("error")
    assert document == {
        "sealed_now": 0,
        "sealed_ids": [],
        "ledger": ledger_report(
            ok=False,
            chain="broken",
            entries=1,
            broken_at=1,
            reason="entry hash does not match its contents",
            unsealed=[stray.id],
            disputed=[a],
        ),
    }
    assert (bank / "ledger.jsonl").read_bytes() == before
    code, out, err = run_main(capsys, "bank", "seal", str(tmp_path / "absent"))
    assert (code, out, err) == (1, "", f"error: {tmp_path / 'absent'}: does not exist\n")


def test_seal_exits_one_when_a_sealed_memory_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """seal still adopts, but exits 1 and says FAILED when the ledger then names a missing
    memory (an integrity failure, as `ledger seal` does)."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    next((bank / "memories").glob(f"*_{a}.json")).unlink()
    code, out, err = run_main(capsys, "bank", "seal", str(bank))
    assert (code, out) == (1, "")
    assert err == (
        f"FAILED: sealed 0 now; ledger chain intact; missing: {a}\n"
        "error: bank not ok after sealing: 0 altered, 1 missing\n"
    )


def test_seal_error_counts_altered_and_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One sealed file tampered, two deleted: exit 1, and the error line explains the
    verdict with both counts (--json keeps the ledger report and exits 1 too)."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    b = add(capsys, bank, "b")
    c = add(capsys, bank, "c")
    tampered = next((bank / "memories").glob(f"*_{a}.json"))
    tampered.chmod(0o644)
    tampered.write_bytes(tampered.read_bytes().replace(b'"content":"a"', b'"content":"A"'))
    next((bank / "memories").glob(f"*_{b}.json")).unlink()
    next((bank / "memories").glob(f"*_{c}.json")).unlink()
    code, out, err = run_main(capsys, "bank", "seal", str(bank), "-q")
    assert (code, out) == (1, "")
    assert err == "error: bank not ok after sealing: 1 altered, 2 missing\n"
    code, out, err = run_main(capsys, "bank", "seal", str(bank), "--json", "-q")
    ledger = json.loads(out)["ledger"]
    assert code == 1 and (ledger["altered"], ledger["missing"]) == ([a], sorted([b, c]))
    assert err == "error: bank not ok after sealing: 1 altered, 2 missing\n"


@pytest.mark.parametrize(
    ("option", "argv"),
    [
        ("--content", ["--content", "a\udcffb"]),
        ("--type", ["--content", "x", "--type", "f\udcc3"]),
        ("--scope", ["--content", "x", "--scope", "\udcff"]),
        ("--tag", ["--content", "x", "--tag", "ok", "--tag", "t\udc80"]),
        ("--link", ["--content", "x", "--link", "urn:x:\udcff"]),
        ("--source-session", ["--content", "x", "--source-session", "s\udcff"]),
    ],
)
def test_add_refuses_arguments_that_are_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, argv: list[str]
) -> None:
    """A text argument holding bytes that are not UTF-8 (surrogate-escaped by Python): exit
    1, `error: OPTION is not valid UTF-8` (not "lone surrogate"), nothing created."""
    base = ["bank", "add", str(tmp_path / "b1"), "--type", "fact", "--scope", "p"]
    code, out, err = run_main(capsys, *base, *argv)  # a later --type/--scope wins
    assert (code, out, err) == (1, "", f"error: {option} is not valid UTF-8\n")
    assert list(tmp_path.iterdir()) == []


def test_consolidate_and_archive_refuse_ids_and_content_that_are_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """consolidate --content that is not UTF-8: the one-line error; an ID that is not UTF-8
    is not hex either: a usage error (exit 2)."""
    bank = tmp_path / "bank"
    a = add(capsys, bank, "a")
    code, out, err = run_main(capsys, "bank", "consolidate", str(bank), a, "--content", "\udcff")
    assert (code, out, err) == (1, "", "error: --content is not valid UTF-8\n")
    code, out, err = run_main(capsys, "bank", "archive", str(bank), "a\udcff")
    assert (code, out) == (2, "") and err.endswith("(4-64 hex digits): 'a\\udcff'\n")


def test_a_bank_path_that_is_not_utf8_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The BANK path is a file name, which may be any bytes: not refused."""
    bank = tmp_path / "b\udcff"
    memory_id = add(capsys, bank, "x")
    assert os.path.isdir(os.fsencode(tmp_path) + b"/b\xff/memories")
    assert len(memory_id) == 64


def test_subprocess_add_with_invalid_utf8_content(tmp_path: Path) -> None:
    """`bank add b1 ... --content "$(printf 'a\\xffb')"` as real argv bytes: exit 1,
    `error: --content is not valid UTF-8`, no bank created."""
    argv = [os.fsencode(sys.executable), b"-m", b"merkle_memory", b"bank", b"add", b"b1"]
    argv += [b"--type", b"fact", b"--scope", b"p", b"--content", b"a\xffb"]
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr == b"error: --content is not valid UTF-8\n"
    assert list(tmp_path.iterdir()) == []


def test_subprocess_seal_json(tmp_path: Path) -> None:
    """`python -m merkle_memory bank seal BANK --json` adopts a stray memory file."""
    bank = tmp_path / "bank"
    stray = Memory("fact", "p", "x", timestamp=T0)
    (bank / "memories").mkdir(parents=True)
    (bank / "memories" / stray.file_name).write_bytes(stray.to_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "bank", "seal", str(bank), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {
        "sealed_now": 1,
        "sealed_ids": [stray.id],
        "ledger": ledger_report(entries=1, sealed=1),
    }
