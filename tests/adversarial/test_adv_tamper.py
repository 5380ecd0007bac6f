"""Tamper matrix: single-byte substitutions in every record file and ledger line (issue 7).

A small tenant (three records, three ledger lines) is tampered one byte at a time. For each
byte position a handful of replacement bytes is tried (``ALPHABET`` plus the byte with its low
bit flipped, and whitespace swaps where the byte is whitespace). A naive oracle, written here
independently of the library, decides whether the substitution changes what is sealed:

* record file: parse strictly with the stdlib (duplicate keys and NaN/Infinity refused) and
  compare the RFC 8785 bytes of the sealed fields and the id with the original's;
* ledger: split the file into lines and compare each parsed line with the original entry.

A change must make verify not ok and name the right record (altered or missing) or the right
line (``broken_at`` = its seq); a substitution that changes nothing sealed (JSON whitespace, a
float digit beyond double precision, a filing field) must keep the seal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support import SEALED_FIELDS

from merkle_memory import canonical
from merkle_memory.ledger import verify_ledger
from merkle_memory.ledger.tenant import Tenant

ALPHABET = b' "0x\\\n\xff'
"""Replacement bytes tried at every position (plus low-bit flip and whitespace swaps)."""

# Hand-written record files (another tool's formatting): tabs, CRLF, a float written with more
# digits than a double holds, filing fields, non-ASCII text.
RECORDS = {
    "m1": '{\n\t"id": "m1",\r\n\t"summary": "chose SQLite ✓",\n\t"key_facts": '
    '[0.1000000000000000000001, 2],\n\t"category": "decision", "tags": ["db"]\n}\n',
    "m2": '{"id":"m2","session_id":"s1","agent_id":"cc","summary":"café",'
    '"decisions_made":["d"],"timestamp":"2026-09-01T00:00:00+00:00","superseded_by":null}',
    "m3": '{ "id" : "m3" , "projects_referenced" : [ "p" ] , "key_facts" : { "n" : -1.5e-3 } }\n',
}


class _Bad(Exception):
    pass


def _strict(data: bytes) -> Any:
    """Naive strict parse: stdlib json, UTF-8, no duplicate keys, no NaN/Infinity."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in items}) != len(items):
            raise _Bad("duplicate")
        return dict(items)

    def constant(name: str) -> Any:
        raise _Bad(name)

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)
    except (ValueError, _Bad, RecursionError):
        return _Bad


def _sealed_bytes(data: bytes) -> bytes | None:
    """RFC 8785 bytes of the sealed fields, or None when the file cannot testify."""
    value = _strict(data)
    if type(value) is not dict:
        return None
    try:
        return canonical.dumps({f: value.get(f) for f in SEALED_FIELDS})
    except ValueError:
        return None


def _poke(path: Path, pos: int, byte: int) -> None:
    """Overwrite one byte in place (same length: no truncation, which is slow on some file
    systems)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes([byte]), pos)
    finally:
        os.close(fd)


def _replacements(byte: int) -> set[int]:
    out = set(ALPHABET) | {byte ^ 0x01}
    if byte in b" \t\r\n":
        out |= set(b" \t\r\n")
    out.discard(byte)
    return out


@pytest.fixture
def store(tmp_path: Path) -> Tenant:
    """The small tenant: three hand-written records adopted into a three-line ledger."""
    tenant = Tenant(tmp_path / "t")
    tenant.memory_dir.mkdir(parents=True)
    for mid, text in RECORDS.items():
        (tenant.memory_dir / f"{mid}.json").write_bytes(text.encode())
    report = tenant.seal()
    assert report.sealed_ids == ("m1", "m2", "m3") and report.report.ok
    return tenant


def test_record_file_tamper_matrix(store: Tenant) -> None:
    """Every substitution in every record file: changed testimony is named, others keep."""
    changed = kept = 0
    kept_kinds = {"whitespace": 0, "float-digit": 0, "filing": 0}
    for mid, text in RECORDS.items():
        path = store.memory_dir / f"{mid}.json"
        original = text.encode()
        base = _sealed_bytes(original)
        assert base is not None
        for pos, byte in enumerate(original):
            for new in _replacements(byte):
                data = original[:pos] + bytes([new]) + original[pos + 1 :]
                _poke(path, pos, new)
                report = store.verify()
                if _sealed_bytes(data) == base:
                    kept += 1
                    assert report.ok and report.sealed == 3, (mid, pos, data)
                    if byte in b" \t\r\n" and new in b" \t\r\n":
                        kept_kinds["whitespace"] += 1
                    elif chr(byte).isdigit() and chr(new).isdigit():
                        kept_kinds["float-digit"] += 1
                    else:
                        kept_kinds["filing"] += 1
                else:
                    changed += 1
                    assert not report.ok, (mid, pos, data)
                    assert mid in report.altered + report.missing, (mid, pos, data, report)
            _poke(path, pos, byte)
        assert path.read_bytes() == original
    assert store.verify().ok
    assert changed > 2000 and kept > 100
    assert all(n > 0 for n in kept_kinds.values()), kept_kinds


def _entries(data: bytes) -> list[Any]:
    # Lines as the anchor reads them: split at LF, ASCII whitespace stripped, blanks skipped.
    return [_strict(line.strip()) for line in data.split(b"\n") if line.strip()]


def test_ledger_line_tamper_matrix(store: Tenant) -> None:
    """Every substitution in every ledger line that changes an entry breaks the chain at
    that line's seq and makes verify not ok; one that leaves every entry equal keeps it."""
    path = store.ledger.path
    original = path.read_bytes()
    lines = original.split(b"\n")
    assert len(lines) == 4 and lines[3] == b""
    base = _entries(original)
    testimony = store.testimony()
    changed = kept = 0
    start = 0
    for number, line in enumerate(lines[:3], 1):
        for pos in range(start, start + len(line) + 1):  # the line and its newline
            for new in _replacements(original[pos]):
                data = original[:pos] + bytes([new]) + original[pos + 1 :]
                _poke(path, pos, new)
                report = verify_ledger(path, testimony)
                if _entries(data) == base:
                    kept += 1
                    assert report.ok and report.chain == "intact", (number, pos, data)
                else:
                    changed += 1
                    assert not report.ok, (number, pos, data)
                    assert report.chain == "broken"
                    assert report.broken_at == number, (number, pos, data, report)
            _poke(path, pos, original[pos])
        start += len(line) + 1
    assert path.read_bytes() == original
    assert store.verify().ok
    assert changed > 5000
    assert kept >= 3  # the final newline swapped for whitespace: a complete last line is kept
