"""`merkle-memory canon [FILE|-] [--hash]`: canonical bytes or digest on stdout, errors exit 1."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO, asset_path

from merkle_memory.cli import main

CYBERPHONE = ("arrays", "french", "structures", "unicode", "values", "weird")


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def run_canon(args: list[str], capsysbinary: Any) -> tuple[int, bytes, bytes]:
    code = main(["canon", *args])
    out, err = capsysbinary.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", CYBERPHONE)
def test_each_cyberphone_input_prints_expected_bytes(name: str, capsysbinary: Any) -> None:
    """canon FILE prints exactly the expected output bytes, with no newline."""
    source = asset_path("jcs", "cyberphone", "input", f"{name}.json")
    expected = asset_path("jcs", "cyberphone", "output", f"{name}.json").read_bytes()
    code, out, err = run_canon([str(source)], capsysbinary)
    assert (code, out, err) == (0, expected, b"")


@pytest.mark.parametrize("name", CYBERPHONE)
def test_hash_prints_digest_and_newline(name: str, capsysbinary: Any) -> None:
    """canon --hash prints the SHA-256 of the expected bytes, 64 hex and one newline."""
    source = asset_path("jcs", "cyberphone", "input", f"{name}.json")
    expected = asset_path("jcs", "cyberphone", "output", f"{name}.json").read_bytes()
    code, out, _ = run_canon([str(source), "--hash"], capsysbinary)
    assert code == 0
    assert out == hashlib.sha256(expected).hexdigest().encode() + b"\n"


def test_stdin_by_dash_and_by_default(monkeypatch: pytest.MonkeyPatch, capsysbinary: Any) -> None:
    """`canon -` and `canon` read standard input."""
    for args in (["-"], []):
        monkeypatch.setattr(sys, "stdin", _Stdin(b'{"b": 1, "a": [1.0, 2e-7]}\n'))
        assert run_canon(args, capsysbinary) == (0, b'{"a":[1,2e-7],"b":1}', b"")
    monkeypatch.setattr(sys, "stdin", _Stdin(b'{"b": 1, "a": [1.0, 2e-7]}'))
    code, out, _ = run_canon(["--hash"], capsysbinary)
    assert code == 0
    assert out == hashlib.sha256(b'{"a":[1,2e-7],"b":1}').hexdigest().encode() + b"\n"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"not json", b"not JSON"),
        (b"[NaN]", b"NaN"),
        (b'{"a":1,"a":2}', b"duplicate"),
        (b"[9007199254740993]", b"integer"),
        (b"[1E400]", b"infinity"),
        (b'["\\ud800"]', b"surrogate"),
        (b"\xff", b"UTF-8"),
        (b"[" * 600 + b"]" * 600, b"nesting"),
        (b"", b"not JSON"),
    ],
)
def test_bad_input_prints_one_error_line(
    data: bytes, words: bytes, tmp_path: Path, capsysbinary: Any
) -> None:
    """Unusable input: exit 1, nothing on stdout, one `error: ...` line on stderr."""
    path = tmp_path / "in.json"
    path.write_bytes(data)
    code, out, err = run_canon([str(path)], capsysbinary)
    assert (code, out) == (1, b"")
    assert err.startswith(b"error: ") and err.count(b"\n") == 1
    assert words in err


def test_missing_file_is_an_error(tmp_path: Path, capsysbinary: Any) -> None:
    """A missing file exits 1 with one error line naming it."""
    missing = tmp_path / "nope.json"
    code, out, err = run_canon([str(missing)], capsysbinary)
    assert (code, out) == (1, b"")
    assert err.startswith(b"error: ") and err.count(b"\n") == 1
    assert str(missing).encode() in err


def test_usage_error_exits_2(capsysbinary: Any) -> None:
    """An unknown flag is a usage error (exit 2)."""
    code, out, _ = run_canon(["--bogus"], capsysbinary)
    assert (code, out) == (2, b"")


def test_subprocess_python_m(tmp_path: Path) -> None:
    """`python -m merkle_memory canon` works as a real process, on a file and on stdin."""
    path = tmp_path / "v.json"
    path.write_text('{"\\u20ac": 1e21, "1": [true, null, -0.0]}', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "canon", str(path)],
        capture_output=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (
        0, '{"1":[true,null,0],"\u20ac":1e+21}'.encode(), b""
    )  # fmt: skip
    bad = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "canon", "-"],
        input=b"[2e400]", capture_output=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert (bad.returncode, bad.stdout) == (1, b"")
    assert bad.stderr.startswith(b"error: ") and b"Traceback" not in bad.stderr
