"""Known-answer vectors for canonical JSON, read from tests/assets/jcs as data."""

from __future__ import annotations

import csv
import gzip
import json
import struct
from pathlib import Path

import es6_numbers
import pytest
from support import asset_path

from merkle_memory import canonical
from merkle_memory.errors import (
    CanonicalizationError,
    DuplicateKeyError,
    FloatDomainError,
    IntegerDomainError,
    SurrogateError,
)

CYBERPHONE = ("arrays", "french", "structures", "unicode", "values", "weird")

# Each ERROR case of extra/edge_cases.jsonl and the error class it must raise.
EDGE_ERRORS: dict[str, type[CanonicalizationError]] = {
    "lone-high-surrogate-value": SurrogateError,
    "lone-low-surrogate-key": SurrogateError,
    "overflow-1e400": FloatDomainError,
    "nan-literal": FloatDomainError,
    "duplicate-key": DuplicateKeyError,
    "int-2^53+1": IntegerDomainError,
}


def _double(hex_bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(hex_bits.zfill(16)))[0]
    return value


def _check_number_line(line: str) -> None:
    hex_bits, expected = line.rstrip("\n").split(",")
    value = _double(hex_bits)
    assert canonical.format_number(value) == expected, hex_bits
    assert canonical.dumps(value) == expected.encode("ascii"), hex_bits
    parsed = canonical.loads(expected)
    assert parsed == value, hex_bits
    assert canonical.dumps(parsed) == expected.encode("ascii"), hex_bits


@pytest.mark.parametrize("name", CYBERPHONE)
def test_cyberphone_input_gives_expected_output(name: str) -> None:
    """Each cyberphone input file canonicalizes to its output file, byte for byte."""
    data = asset_path("jcs", "cyberphone", "input", f"{name}.json").read_bytes()
    expected = asset_path("jcs", "cyberphone", "output", f"{name}.json").read_bytes()
    assert canonical.dumps(canonical.loads(data)) == expected
    assert canonical._dumps_reference(canonical.loads(data)) == expected


@pytest.mark.parametrize("name", CYBERPHONE)
def test_cyberphone_outhex_matches_output(name: str) -> None:
    """The outhex form of each expected output is the same bytes, and output is a fixpoint."""
    hex_text = asset_path("jcs", "cyberphone", "outhex", f"{name}.txt").read_text()
    expected = bytes.fromhex("".join(hex_text.split()))
    data = asset_path("jcs", "cyberphone", "input", f"{name}.json").read_bytes()
    assert canonical.dumps(canonical.loads(data)) == expected
    assert canonical.dumps(canonical.loads(expected)) == expected


def _appendix_b_rows() -> list[tuple[str, str]]:
    path = asset_path("jcs", "rfc8785", "appendix_b.csv")
    with path.open(newline="") as handle:
        return [(row["ieee754_hex"], row["expected"]) for row in csv.DictReader(handle)]


def test_rfc8785_appendix_b() -> None:
    """RFC 8785 Appendix B: each double formats as listed; the NaN/Infinity rows raise."""
    rows = _appendix_b_rows()
    assert len(rows) == 26
    errors = 0
    for hex_bits, expected in rows:
        value = _double(hex_bits)
        if expected == "ERROR":
            errors += 1
            with pytest.raises(FloatDomainError):
                canonical.dumps(value)
            with pytest.raises(FloatDomainError):
                canonical.dumps([value])
            with pytest.raises(FloatDomainError):
                canonical.format_number(value)
        else:
            assert canonical.dumps(value) == expected.encode("ascii"), hex_bits
            assert canonical.dumps({"v": [value]}) == b'{"v":[' + expected.encode() + b"]}"
    assert errors == 2


def test_rfc8785_sorting_example() -> None:
    """RFC 8785 §3.2.3: the sorting example gives the listed order (UTF-16 code units)."""
    data = asset_path("jcs", "rfc8785", "sorting_input.json").read_bytes()
    expected = asset_path("jcs", "rfc8785", "sorting_output.json").read_bytes()
    value = canonical.loads(data)
    assert canonical.dumps(value) == expected.rstrip(b"\n")
    assert canonical._dumps_reference(value) == expected.rstrip(b"\n")


def _edge_cases() -> list[dict[str, str | None]]:
    path = asset_path("jcs", "extra", "edge_cases.jsonl")
    # split on "\n" only: str.splitlines would also cut at the raw U+2028 of one case
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def test_edge_cases() -> None:
    """Every edge case: strict loads then dumps gives `expect`, or the mapped error is raised."""
    cases = _edge_cases()
    assert len(cases) == 17
    seen_errors = set()
    for case in cases:
        text = case["json_input"]
        assert isinstance(text, str)
        if case["expect"] == "ERROR":
            error = EDGE_ERRORS[str(case["id"])]
            seen_errors.add(case["id"])
            with pytest.raises(error):
                canonical.loads(text)
            with pytest.raises(error):
                canonical.loads(text.encode("utf-8"))
        else:
            out = canonical.dumps(canonical.loads(text.encode("utf-8")))
            assert out == str(case["expect"]).encode("utf-8"), case["id"]
            assert out.hex() == case["expect_hex"], case["id"]
    assert seen_errors == set(EDGE_ERRORS)


def test_es6_first_10k_lines_one_by_one() -> None:
    """Each of the 10,000 ES6 number lines: format, dumps, loads and re-dumps give the line."""
    path = asset_path("jcs", "cyberphone", "es6testfile_first10k.txt")
    lines = path.read_text(encoding="ascii").splitlines(keepends=True)
    assert len(lines) == 10_000
    for line in lines:
        _check_number_line(line)


def test_es6_first_100k_gz_lines() -> None:
    """Each of the 100,000 gzipped ES6 number lines formats to its expected text."""
    path: Path = asset_path("jcs", "cyberphone", "es6testfile_first100k.txt.gz")
    with gzip.open(path, "rt", encoding="ascii") as handle:
        lines = handle.read().splitlines()
    assert len(lines) == 100_000
    bad = []
    for line in lines:
        hex_bits, expected = line.split(",")
        if canonical.format_number(_double(hex_bits)) != expected:
            bad.append(line)
    assert bad == []


def test_es6_generator_matches_shipped_10k_file() -> None:
    """The generator's first 10,000 lines are exactly the shipped file."""
    path = asset_path("jcs", "cyberphone", "es6testfile_first10k.txt")
    assert "".join(es6_numbers.lines(10_000)) == path.read_text(encoding="ascii")


@pytest.mark.parametrize("count", [1_000, 10_000, 100_000])
def test_es6_generator_sha256_matches_published(count: int) -> None:
    """SHA-256 and size of the first 1k/10k/100k generated lines equal the published table."""
    assert es6_numbers.file_digest(count) == es6_numbers.PUBLISHED[count]


@pytest.mark.slow
def test_es6_generator_sha256_one_million_lines() -> None:
    """SHA-256 and size of the first 1,000,000 generated lines equal the published value."""
    assert es6_numbers.file_digest(1_000_000) == es6_numbers.PUBLISHED[1_000_000]
