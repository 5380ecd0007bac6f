"""Fuzzing with Hypothesis: only ``MerkleMemoryError`` subclasses may escape (issue 7).

Arbitrary bytes, and real transcripts with random byte edits, go into ``canonical.loads``,
every transcript importer (by name and ``auto``), the ledger reader (``verify_ledger``,
``Ledger.entries``, ``Ledger.append`` onto the bytes) and the record reader. Any other
exception (``KeyError``, ``TypeError``, ``UnicodeError``, ``RecursionError``,
``json.JSONDecodeError``, ...) is a fault. ``EXAMPLES`` examples per target in CI; the soak
variant (``MERKLE_MEMORY_SOAK=1``) runs 20 times as many. The atheris targets in ``fuzz/``
do the same for long runs.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ledger_report, shared_path

from merkle_memory import canonical
from merkle_memory.errors import MerkleMemoryError
from merkle_memory.ledger import Ledger, verify_ledger
from merkle_memory.ledger.records import read_record
from merkle_memory.transcripts import FORMAT_NAMES, import_file

SOAK = os.environ.get("MERKLE_MEMORY_SOAK", "") not in ("", "0")
EXAMPLES = 150 * (40 if SOAK else 1)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=not SOAK,
)
WORK = Path(tempfile.mkdtemp(prefix="mm-fuzz-"))

# JSON-ish bytes: structural characters, escapes and number parts, so the parsers get past
# their first byte far more often than with uniform bytes.
_TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b"\\",
    b"\\u",
    b"d800",
    b"0",
    b"1",
    b"-",
    b"e",
    b".",
    b"400",
    b"9007199254740993",
    b"true",
    b"null",
    b"NaN",
    b"Infinity",
    b" ",
    b"\n",
    b"\xff",
    b"\xc3",
    b"\xef\xbb\xbf",
    b'"seq"',
    b'"type"',
    b'"role"',
    b'"content"',
    b'"message"',
    b'"user"',
    b'"text"',
    b'"tool_use"',
    b'"hash"',
    b'"id"',
    b'"messages"',
]
JSONISH = st.lists(st.sampled_from(_TOKENS) | st.binary(max_size=3), max_size=60).map(b"".join)
BYTES = st.binary(max_size=400) | JSONISH


def _only_library_errors(call: object) -> None:
    with contextlib.suppress(MerkleMemoryError):
        call()  # type: ignore[operator]


@FUZZ
@given(BYTES)
def test_fuzz_canonical_loads(data: bytes) -> None:
    """``canonical.loads`` on any bytes: a value that round-trips, or a library error."""
    try:
        value = canonical.loads(data)
    except MerkleMemoryError:
        return
    out = canonical.dumps(value)
    assert canonical.dumps(canonical.loads(out)) == out


@FUZZ
@given(BYTES, st.sampled_from((*FORMAT_NAMES, "auto")))
def test_fuzz_importers_arbitrary_bytes(data: bytes, format_name: str) -> None:
    """Every importer (and ``auto``) on any bytes: nodes or TranscriptFormatError."""
    path = WORK / "transcript.bin"
    path.write_bytes(data)
    _only_library_errors(lambda: import_file(path, format_name))


_REAL: list[tuple[str, bytes]] = []


def _real_inputs() -> list[tuple[str, bytes]]:
    """The real transcripts of ``../shared/real_inputs`` (the test skips when absent)."""
    if not _REAL:
        folder = shared_path("real_inputs")
        suffixes = (".jsonl", ".json", ".af")
        _REAL.extend(
            sorted((p.name, p.read_bytes()) for p in folder.iterdir() if p.suffix in suffixes)
        )
    return _REAL


@FUZZ
@given(st.data())
def test_fuzz_importers_mutated_real_transcripts(data: st.DataObject) -> None:
    """Real transcripts with random byte substitutions, cuts and splices: only library errors."""
    name, original = data.draw(st.sampled_from(_real_inputs()))
    blob = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["sub", "cut", "dup", "token"]))
        pos = data.draw(st.integers(0, max(len(blob) - 1, 0)))
        if kind == "sub" and blob:
            blob[pos] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del blob[pos : pos + data.draw(st.integers(1, 64))]
        elif kind == "dup":
            blob[pos:pos] = blob[pos : pos + data.draw(st.integers(1, 64))]
        else:
            blob[pos:pos] = data.draw(st.sampled_from(_TOKENS))
    path = WORK / name
    path.write_bytes(bytes(blob))
    format_name = data.draw(st.sampled_from((*FORMAT_NAMES, "auto")))
    _only_library_errors(lambda: import_file(path, format_name))


@FUZZ
@given(st.lists(BYTES, max_size=6), st.booleans())
def test_fuzz_ledger_reader(lines: list[bytes], with_head: bytes) -> None:
    """verify_ledger never raises on any file; entries/append raise only library errors."""
    folder = WORK / "ledger"
    folder.mkdir(exist_ok=True)
    for name in ("ledger.head", "ledger.torn"):
        (folder / name).unlink(missing_ok=True)
    path = folder / "ledger.jsonl"
    path.write_bytes(b"\n".join(lines))
    if with_head and lines:
        (folder / "ledger.head").write_bytes(lines[0][:80] + b"\n")
    report = verify_ledger(path, {"m1": "0" * 64})
    assert report.chain in ("intact", "broken", "empty")
    assert set(report.to_dict()) == set(ledger_report())
    _only_library_errors(lambda: list(Ledger(path).entries(check_hash=True)))
    before = path.read_bytes()
    try:
        Ledger(path).append("m1", "0" * 64)
    except MerkleMemoryError:
        # Refused: only a torn tail may have been moved to ledger.torn; nothing else changed.
        after = path.read_bytes()
        assert before.startswith(after)
        moved = before[len(after) :]
        if moved:
            assert moved in (folder / "ledger.torn").read_bytes()
        return
    assert verify_ledger(path, {}).entries >= 1


@FUZZ
@given(BYTES)
def test_fuzz_record_reader(data: bytes) -> None:
    """``read_record`` on any bytes: a dict, or RecordError."""
    path = WORK / "record.json"
    path.write_bytes(data)
    try:
        value = read_record(path)
    except MerkleMemoryError:
        return
    assert type(value) is dict
