"""The command line as a whole: --version, help texts, -q, progress, errors (issue 9 item 4)."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from merkle_memory import __version__
from merkle_memory.cli import build_parser, main
from merkle_memory.cli._output import Progress, one_line
from merkle_memory.ledger.tenant import Tenant

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claude_code_session.jsonl"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args: str, stdin: bytes = b"", cwd: Path = REPO) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "merkle_memory", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=_env(),
        timeout=60,
        check=False,
    )


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) below ``parser``, groups and leaves alike."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*path, name), sub))
                found.extend(_commands(sub, (*path, name)))
    return found


COMMANDS = _commands(build_parser())
LEAVES = [(path, p) for path, p in COMMANDS if p.get_default("func") is not None]


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _two_tenants(tmp_path: Path) -> Path:
    for name in ("alpha", "beta"):
        Tenant(tmp_path / "agents" / name).save({"id": f"{name}-1", "summary": name})
    (tmp_path / "agents" / "not a tenant!").mkdir()
    return tmp_path


# --- version and help --------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints `merkle-memory <version>` on stdout and exits 0."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"merkle-memory {__version__}\n"


def test_command_tree_is_the_design_one() -> None:
    """The commands are exactly those of DESIGN section 7 (plus keygen, bank seal, the
    moves of a tenant between a database and a folder, the forgetting commands, the issue 18
    commands: ledger tiles / witness / verify-checkpoint, witness serve, issue 19's ledger
    verify-tiles, and the archive
    commands of issue 17: dag sync, dag restore, dag sessions, and the ledger writers save
    and recover)."""
    leaves = {" ".join(path) for path, _ in LEAVES}
    design = {
        "canon",
        "dag import",
        "dag show",
        "dag verify",
        "ledger verify",
        "ledger seal",
        "ledger prove",
        "ledger consistency",
        "ledger checkpoint",
        "ledger verify-proof",
        "bank add",
        "bank list",
        "bank verify",
        "bank archive",
        "bank consolidate",
        "bank migrate",
    }
    assert design <= leaves
    forgetting = {"ledger forget", "ledger init", "bank forget", "dag forget"}  # issue 20
    moves = {"ledger export", "ledger import"}  # issue 19
    tlog = {"ledger tiles", "ledger witness", "ledger verify-checkpoint", "witness serve"}
    tlog.add("ledger verify-tiles")  # issue 19: the tiles client on the command line
    archive = {"dag sync", "dag restore", "dag sessions"}  # issue 17
    writers = {"ledger save", "ledger recover"}  # issue 16
    allowed = {"ledger keygen", "bank seal", *forgetting, *moves, *tlog, *archive, *writers}
    assert leaves - design <= allowed


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_has_description_and_examples(path: tuple[str, ...]) -> None:
    """Each command and subcommand has a help line, a description and an epilog of 1-3
    examples that start with `merkle-memory` and keep their own lines in --help."""
    parser = dict(COMMANDS)[path]
    assert parser.description and len(parser.description) > 20
    assert parser.epilog is not None and parser.epilog.startswith("examples:\n")
    examples = [line for line in parser.epilog.splitlines() if line.startswith("  merkle-memory")]
    assert 1 <= len(examples) <= 3, examples
    help_text = parser.format_help()
    for line in parser.epilog.splitlines():
        assert line in help_text.splitlines()


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=" ".join)
def test_every_subcommand_takes_quiet(path: tuple[str, ...]) -> None:
    """-q and --quiet are accepted after every subcommand name."""
    parser = dict(COMMANDS)[path]
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {"-q", "--quiet", "-h"} <= flags


@pytest.mark.parametrize(
    "argv",
    [
        ["canon", "-", "--hash"],
        ["dag", "import", "a", "b", "--format", "letta", "--store", "DB", "--json"],
        ["dag", "show", "abcd", "--store", "DB", "--json"],
        ["dag", "verify", "--store", "DB", "--json"],
        ["ledger", "verify", "T1", "T2", "--json"],
        ["ledger", "verify", "--all", "ROOT", "--json"],
        ["ledger", "seal", "--all", "ROOT", "--json"],
        ["ledger", "prove", "T", "--memory-id", "ID", "--json"],
        ["ledger", "consistency", "T", "--old-size", "3", "--json"],
        ["ledger", "checkpoint", "T", "--origin", "o", "--key", "K", "--json"],
        ["ledger", "verify-proof", "P.json", "--root", "00"],
        ["ledger", "verify-proof", "P.json", "--checkpoint", "C", "--key", "K"],
        [
            "bank",
            "add",
            "B",
            "--type",
            "t",
            "--scope",
            "s",
            "--content",
            "c",
            "--tag",
            "x",
            "--tag",
            "y",
            "--link",
            "u",
            "--source-session",
            "s1",
            "--timestamp",
            "2026-01-01Z",
        ],
        ["bank", "list", "B", "--archived", "--json"],
        ["bank", "verify", "B", "--json"],
        ["bank", "archive", "B", "ab12"],
        [
            "bank",
            "consolidate",
            "B",
            "ab12",
            "cd34",
            "--content",
            "c",
            "--type",
            "t",
            "--scope",
            "s",
        ],
        ["bank", "migrate", "B", "--json"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_design_flags_parse(argv: list[str]) -> None:
    """Every flag DESIGN section 7 spells parses, with -q after it and before the command."""
    parser = build_parser()
    assert parser.parse_args([*argv, "-q"]).quiet is True
    assert parser.parse_args(["-q", *argv]).quiet is True
    assert parser.parse_args(argv).quiet is False


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown flag or a missing command is a usage error: exit 2, usage on stderr."""
    assert main(["ledger", "prove", "T"]) == 2
    assert main(["frobnicate"]) == 2
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: merkle-memory" in err


# --- -q ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["after", "before"])
def test_quiet_silences_messages_not_results_or_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """-q drops the `skipped ...` notice, keeps the JSON on stdout and the error line."""
    root = _two_tenants(tmp_path)
    argv = ["ledger", "verify", "--all", str(root), "--json"]
    assert main(argv) == 0
    loud = capsys.readouterr()
    assert "skipped not a tenant!" in loud.err
    assert main([*argv, "-q"] if where == "after" else ["-q", *argv]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and json.loads(quiet.out) == json.loads(loud.out)
    missing = str(tmp_path / "nowhere")
    argv = (
        ["ledger", "verify", missing, "-q"]
        if where == "after"
        else ["-q", "ledger", "verify", missing]
    )
    assert main(argv) == 1
    assert capsys.readouterr().err == "error: nowhere: does not exist\n"


def test_quiet_checkpoint_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """checkpoint without --key warns on stderr; -q drops the warning, not the note."""
    Tenant(tmp_path / "t").save({"id": "a"})
    argv = ["ledger", "checkpoint", str(tmp_path / "t"), "--origin", "example.com/t"]
    assert main(argv) == 0
    loud = capsys.readouterr()
    assert loud.err.startswith("warning: no --key")
    assert main([*argv, "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == loud.out and quiet.out.startswith("example.com/t\n1\n")


# --- progress ----------------------------------------------------------------------------


def test_progress_draws_rate_limited_and_clears() -> None:
    """The first update draws at once, later ones at most every 0.1 s, each starting with
    \\r; leaving the block erases the line with spaces."""
    stream, clock = FakeTTY(), Clock()
    with Progress("work", total=4, stream=stream, clock=clock) as progress:
        progress.advance(detail="a")
        clock.now = 0.05
        progress.advance(detail="b")
        clock.now = 0.16
        progress.advance(detail="c")
    drawn = stream.getvalue()
    line1, line3 = "work: 1/4 (25%) a", "work: 3/4 (75%) c"
    assert drawn == "\r" + line1 + "\r" + line3 + "\r" + " " * len(line3) + "\r"


def test_progress_pads_a_shorter_line_and_counts_without_total() -> None:
    """A shorter redraw is padded over the longer one; without a total only the count shows,
    and before the first unit only the detail (a status line)."""
    stream, clock = FakeTTY(), Clock()
    with Progress("n", stream=stream, clock=clock) as progress:
        progress.show("long detail")
        clock.now = 1
        progress.advance()
        assert progress.text() == "n: 1 long detail"
        progress.detail = ""
        clock.now = 2
        progress.advance()
    assert stream.getvalue().split("\r")[1:4] == [
        "n: long detail",
        "n: 1 long detail",
        "n: 2" + " " * 12,
    ]


def test_progress_disabled_writes_nothing() -> None:
    """A disabled progress line writes nothing, but still counts."""
    stream = FakeTTY()
    with Progress("work", total=2, enabled=False, stream=stream) as progress:
        for _ in progress.wrap("ab"):
            pass
    assert stream.getvalue() == "" and progress.done == 2


def test_progress_escapes_detail() -> None:
    """A hostile detail (a file name with an escape sequence) cannot drive the terminal."""
    progress = Progress("x", enabled=False)
    progress.show("a\x1b[2Jb\n")
    assert progress.text() == "x: a\\x1b[2Jb\\n"
    assert one_line("ok") == "ok"


def test_cli_progress_only_on_a_terminal_and_not_with_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger verify --all draws a progress line on a terminal stderr and erases it; nothing
    when stderr is not a terminal or with -q; stdout is the same in all three."""
    root = _two_tenants(tmp_path)
    argv = ["ledger", "verify", "--all", str(root), "--json"]
    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(argv) == 0
    tty_out = capsys.readouterr().out
    drawn = fake.getvalue()
    assert "\rledger verify: 0/2 (0%) alpha" in drawn
    line = "ledger verify: 0/2 (0%) alpha"
    assert drawn.endswith("\r" + line + "\r" + " " * len(line) + "\r")
    assert drawn.startswith("skipped not a tenant!: not a valid tenant name\n")
    quiet = FakeTTY()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main([*argv, "-q"]) == 0
    assert quiet.getvalue() == "" and capsys.readouterr().out == tty_out
    monkeypatch.undo()
    assert main(argv) == 0
    plain = capsys.readouterr()
    assert "\r" not in plain.err and plain.out == tty_out


# --- errors ------------------------------------------------------------------------------


def test_error_line_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An error quoting a name with a line break stays one `error:` line."""
    bad = tmp_path / "a\nb"
    assert main(["ledger", "prove", str(bad), "--memory-id", "x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "a\\nb" in err


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    """A reader that has gone away (`| head`) ends the command without a traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "merkle_memory", "dag", "import", str(EXAMPLE), "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == b"" and proc.returncode == 1


def test_reader_leaving_mid_result_is_exit_1_not_a_silent_cut(tmp_path: Path) -> None:
    """A large result whose reader leaves after 10 bytes ends with exit 1 (not 0, which
    CPython's short buffered write would give) and nothing on stderr."""
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"key": i} for i in range(100_000)]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "merkle_memory", "canon", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b'[{"key":0}'
    proc.stdout.close()
    assert proc.stderr.read() == b""
    assert proc.wait(timeout=60) == 1
    proc.stderr.close()


def test_head_pipeline_has_no_traceback() -> None:
    """`python -m merkle_memory dag import EXAMPLE --json | head -c 10` prints 10 bytes and
    nothing on stderr."""
    proc = subprocess.run(
        f"{sys.executable} -m merkle_memory dag import examples/claude_code_session.jsonl"
        " --json | head -c 10",
        shell=True,
        capture_output=True,
        cwd=REPO,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and len(proc.stdout) == 10 and proc.stderr == b""


def test_bad_inputs_never_traceback(tmp_path: Path) -> None:
    """Unusable input to each command: exit 1 with exactly one `error: ` line on stderr."""
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\xff\xfe not json")
    tenant = tmp_path / "t"
    Tenant(tenant).save({"id": "a"})
    (tenant / "ledger.jsonl").write_bytes(b"garbage\n")
    bank = tmp_path / "bank"
    cases: list[tuple[list[str], bytes]] = [
        (["canon"], b'{"a": 1, "a": 2}'),
        (["canon", str(junk)], b""),
        (["dag", "import", str(junk)], b""),
        (["dag", "show", "abcd", "--store", str(junk)], b""),
        (["dag", "verify", "--store", str(tmp_path / "none.db")], b""),
        (["ledger", "verify", str(tenant)], b""),
        (["ledger", "seal", str(tenant), "--json"], b""),
        (["ledger", "prove", str(tenant), "--memory-id", "a"], b""),
        (["ledger", "consistency", str(tenant), "--old-size", "1"], b""),
        (["ledger", "verify-proof", "-", "--root", "ab"], b"[]"),
        (["bank", "add", str(bank), "--type", "BAD TYPE", "--scope", "s", "--content", "c"], b""),
        (["bank", "archive", str(bank), "abcdef"], b""),
        (["bank", "verify", str(junk)], b""),
    ]
    for argv, stdin in cases:
        proc = _cli(*argv, stdin=stdin)
        err = proc.stderr.decode()
        assert proc.returncode == 1, (argv, err)
        assert "Traceback" not in err, (argv, err)
        assert [line for line in err.splitlines() if line.startswith("error: ")], (argv, err)
        assert err.endswith("\n") and err.splitlines()[-1].startswith("error: "), (argv, err)


# --- docs/CLI.md -------------------------------------------------------------------------

CLI_DOC = REPO / "docs" / "CLI.md"
HELP_BLOCK = re.compile(r"<!-- help: merkle-memory([a-z -]*) -->\n(.*?)<!-- end help -->\n", re.S)


def _help_text(path: tuple[str, ...]) -> str:
    """The --help output of the command at ``path`` (``()``: the program) at 100 columns."""
    parser = build_parser() if not path else dict(_commands(build_parser()))[path]
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def write_docs() -> None:
    """Rewrite every ``<!-- help: CMD -->`` block of docs/CLI.md from the real --help."""

    def block(match: re.Match[str]) -> str:
        path = tuple(match.group(1).split())
        text = _help_text(path)
        name = "merkle-memory" + match.group(1)
        return f"<!-- help: {name} -->\n```text\n{text}```\n<!-- end help -->\n"

    CLI_DOC.write_text(HELP_BLOCK.sub(block, CLI_DOC.read_text(encoding="utf-8")), "utf-8")


def test_cli_doc_covers_every_command() -> None:
    """docs/CLI.md has a --help block for the program and every command, holding each
    command's usage name, every option string and every example line."""
    blocks = {
        tuple(m.group(1).split()): m.group(2)
        for m in HELP_BLOCK.finditer(CLI_DOC.read_text(encoding="utf-8"))
    }
    assert set(blocks) == {(), *(path for path, _ in COMMANDS)}
    for path, text in blocks.items():
        parser = build_parser() if not path else dict(COMMANDS)[path]
        assert f"usage: {parser.prog}" in text, path
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in text, (path, flag)
        for line in (parser.epilog or "").splitlines():
            assert line in text.splitlines(), (path, line)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-docs"]:
        write_docs()
    else:
        sys.exit("usage: python tests/cli/test_cli_main.py --write-docs")


@pytest.mark.parametrize("tail", ["#", ""], ids=["empty-fragment", "no-fragment"])
def test_a_tenant_url_without_a_name_is_named_by_its_url(
    tail: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger verify`` of a database URL whose fragment names no tenant: the error line is
    prefixed by the URL (its password hidden), never by an empty name; exit 1. The URL is
    refused before any connection (the host does not exist)."""
    url = f"postgresql://u:secret@/db?host=/nonexistent{tail}"
    assert main(["ledger", "verify", url]) == 1
    captured = capsys.readouterr()
    shown = f"postgresql://u:***@/db?host=/nonexistent{tail}"
    assert captured.out == ""
    assert captured.err.startswith(f"error: {shown}: ") and captured.err.count("\n") == 1
    assert "secret" not in captured.err
