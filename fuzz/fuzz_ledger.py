"""atheris target: the ledger reader and appender on any file contents."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from merkle_memory.errors import MerkleMemoryError
    from merkle_memory.ledger import Ledger, verify_ledger
    from merkle_memory.ledger.records import read_record

from _common import run

WORK = Path(tempfile.mkdtemp(prefix="mm-fuzz-ledger-"))


def target(data: bytes) -> None:
    """verify_ledger never raises; entries/append/read_record raise only library errors."""
    for name in ("ledger.head", "ledger.torn"):
        (WORK / name).unlink(missing_ok=True)
    path = WORK / "ledger.jsonl"
    path.write_bytes(data)
    verify_ledger(path, {"m1": "0" * 64})
    with contextlib.suppress(MerkleMemoryError):
        list(Ledger(path).entries(check_hash=True))
    record = WORK / "record.json"
    record.write_bytes(data)
    with contextlib.suppress(MerkleMemoryError):
        read_record(record)
    Ledger(path).append("m1", "0" * 64)


if __name__ == "__main__":
    run(target)
