"""Hostile JSON against ``canonical.loads`` and ``merkle-memory canon`` (issue 7, hostile inputs).

One test per row of the table: each row is an input and the exact error class it must raise.
The same rows go through the command line, which must exit 1 with one ``error:`` line and no
traceback. Rows that name a file-system condition (a directory, an unreadable file) apply to the
command line only, since ``loads`` takes bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from merkle_memory import canonical
from merkle_memory.cli import main
from merkle_memory.errors import (
    CanonicalizationError,
    DuplicateKeyError,
    EncodingError,
    FloatDomainError,
    IntegerDomainError,
    JSONSyntaxError,
    MerkleMemoryError,
    NestingDepthError,
    SurrogateError,
)

from ._helpers import assert_one_error_line, run_cli, unreadable

DEEP = 100_000
"""Nesting depth of the deep rows (the issue's figure)."""

# (row id, JSON text, expected error class)
HOSTILE: list[tuple[str, bytes, type[MerkleMemoryError]]] = [
    ("duplicate-key", b'{"a":1,"a":2}', DuplicateKeyError),
    ("duplicate-key-nested", b'[{"x":{"k":1,"k":1}}]', DuplicateKeyError),
    ("duplicate-key-via-escape", b'{"a":1,"\\u0061":2}', DuplicateKeyError),
    ("nan", b"NaN", FloatDomainError),
    ("infinity-in-array", b"[Infinity]", FloatDomainError),
    ("minus-infinity-value", b'{"x":-Infinity}', FloatDomainError),
    ("1e400", b"1e400", FloatDomainError),
    ("minus-1E+400-in-array", b"[-1E+400]", FloatDomainError),
    ("integer-literal-overflowing-double", b"1" + b"0" * 400, FloatDomainError),
    ("lone-high-surrogate", b'"\\ud800"', SurrogateError),
    ("lone-low-surrogate-key", b'{"\\udc00":1}', SurrogateError),
    ("reversed-surrogate-pair", b'"\\ude00\\ud83d"', SurrogateError),
    ("surrogate-as-raw-utf8", b'"\xed\xa0\x80"', EncodingError),
    ("integer-2**53+1", b"9007199254740993", IntegerDomainError),
    ("integer-minus-2**53-1", b"-9007199254740993", IntegerDomainError),
    ("integer-2**60-exact", b"1152921504606846976", IntegerDomainError),
    ("integer-in-object", b'{"seq":18446744073709551617}', IntegerDomainError),
    ("nesting-100000-arrays", b"[" * DEEP + b"]" * DEEP, NestingDepthError),
    ("nesting-100000-objects", b'{"a":' * DEEP + b"1" + b"}" * DEEP, NestingDepthError),
    ("nesting-100000-unclosed", b"[" * DEEP, NestingDepthError),
    ("nesting-513", b"[" * 513 + b"]" * 513, NestingDepthError),
    ("invalid-utf8-ff", b'"\xff"', EncodingError),
    ("invalid-utf8-truncated", b'"\xc3"', EncodingError),
    ("invalid-utf8-overlong-slash", b'"\xc0\xaf"', EncodingError),
    ("utf8-bom", b'\xef\xbb\xbf{"a":1}', EncodingError),
    ("empty", b"", JSONSyntaxError),
    ("whitespace-only", b" \n\t", JSONSyntaxError),
    ("trailing-data", b"{} {}", JSONSyntaxError),
    ("single-quotes", b"{'a':1}", JSONSyntaxError),
    ("nul-byte", b'{"a":\x00}', JSONSyntaxError),
    ("raw-control-in-string", b'"a\x01b"', JSONSyntaxError),
]


@pytest.mark.parametrize(("data", "error"), [r[1:] for r in HOSTILE], ids=[r[0] for r in HOSTILE])
def test_loads_rejects_hostile_row(data: bytes, error: type[MerkleMemoryError]) -> None:
    """Each hostile row raises exactly its error class (a ValueError too), never a raw one."""
    with pytest.raises(error) as info:
        canonical.loads(data)
    assert type(info.value) is error
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("data", "error"), [r[1:] for r in HOSTILE], ids=[r[0] for r in HOSTILE])
def test_loads_rejects_hostile_row_as_text(data: bytes, error: type[MerkleMemoryError]) -> None:
    """The same rows given as ``str`` (where they decode) raise a CanonicalizationError too."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")  # lone surrogates in a str
        with pytest.raises(SurrogateError):
            canonical.loads(text)
        return
    if text.startswith("\ufeff"):
        with pytest.raises(EncodingError):
            canonical.loads(text)
        return
    with pytest.raises(error):
        canonical.loads(text)


@pytest.mark.parametrize(("data", "error"), [r[1:] for r in HOSTILE], ids=[r[0] for r in HOSTILE])
def test_cli_canon_hostile_row_exits_1(
    data: bytes,
    error: type[MerkleMemoryError],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``canon FILE`` on a hostile row exits 1, prints nothing on stdout and one error line."""
    path = tmp_path / "in.json"
    path.write_bytes(data)
    assert main(["canon", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_error_line(err)


def test_accepted_boundaries_round_trip() -> None:
    """Just inside every limit the value is accepted and its canonical bytes parse back."""
    inside = [
        b"9007199254740991",
        b"-9007199254740991",
        b"9007199254740992",
        b"1152921504606847000",
        b"1e308",
        b"5e-324",
        b'"\\ud83d\\ude00"',
        b"[" * 512 + b"]" * 512,
    ]
    for data in inside:
        value = canonical.loads(data)
        assert canonical.dumps(canonical.loads(canonical.dumps(value))) == canonical.dumps(value)
    assert canonical.loads(b"9007199254740992") == 2.0**53
    assert canonical.loads(b'"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.slow
def test_one_100mb_string_line_parses_exactly() -> None:
    """A 100 MB string value is valid JSON: it parses to exactly 100,000,000 characters."""
    data = b'"' + b"a" * 100_000_000 + b'"'
    value = canonical.loads(data)
    assert isinstance(value, str)
    assert len(value) == 100_000_000
    del value, data


@pytest.mark.slow
def test_one_100mb_garbage_line_is_a_syntax_error_at_offset_0() -> None:
    """100 MB of non-JSON is a JSONSyntaxError at offset 0 (speed lives in benchmarks/)."""
    data = b"x" * 100_000_000
    with pytest.raises(JSONSyntaxError) as info:
        canonical.loads(data)
    assert info.value.pos == 0


@pytest.mark.slow
def test_a_100mb_line_of_open_brackets_is_a_depth_error() -> None:
    """100 MB of ``[`` is a NestingDepthError, never a RecursionError or a MemoryError.

    Depth is decided by a prefix: the pre-scan looks at the first 64 KiB before the whole
    text, so only the C-speed UTF-8 decode and bracket count grow with the input (speed lives
    in benchmarks/, never in a timed test).
    """
    data = b"[" * 100_000_000
    with pytest.raises(NestingDepthError, match="deeper than 512 levels"):
        canonical.loads(data)


def test_cli_canon_directory_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``canon DIR`` (a path that is a directory) exits 1 with one error line."""
    assert main(["canon", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_error_line(err)


def test_cli_canon_missing_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``canon MISSING`` exits 1 with one error line naming the file."""
    missing = tmp_path / "nope.json"
    assert main(["canon", str(missing)]) == 1
    _, err = capsys.readouterr()
    assert_one_error_line(err)
    assert "nope.json" in err


def test_cli_canon_unreadable_file_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``canon FILE`` on an unreadable file exits 1 with one ``Permission denied`` line."""
    path = tmp_path / "secret.json"
    path.write_bytes(b'{"a":1}')
    with unreadable(path):
        assert main(["canon", str(path)]) == 1
    _, err = capsys.readouterr()
    assert_one_error_line(err)
    assert "Permission denied" in err


def test_cli_canon_subprocess_deep_nesting_and_bad_utf8() -> None:
    """``python -m merkle_memory canon -`` on hostile stdin: exit 1, one error line."""
    for data in (b"[" * DEEP + b"]" * DEEP, b'{"a":"\xff"}', b'{"a":1,"a":1}'):
        proc = run_cli("canon", "-", stdin=data)
        assert proc.returncode == 1
        assert proc.stdout == b""
        assert_one_error_line(proc.stderr.decode("utf-8", "replace"))


def test_every_row_error_is_a_canonicalization_error() -> None:
    """The table only names CanonicalizationError subclasses (what a caller catches)."""
    assert all(issubclass(error, CanonicalizationError) for _, _, error in HOSTILE)
    assert len(HOSTILE) == 31
