"""atheris target: every transcript importer (and ``auto``) on any file contents."""

from __future__ import annotations

import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from merkle_memory.errors import MerkleMemoryError
    from merkle_memory.transcripts import FORMAT_NAMES, import_file

from _common import run

WORK = Path(tempfile.mkdtemp(prefix="mm-fuzz-transcripts-"))


def target(data: bytes) -> None:
    """Import the bytes under every format name; only library errors may escape."""
    path = WORK / "transcript.jsonl"
    path.write_bytes(data)
    for name in (*FORMAT_NAMES, "auto"):
        try:
            import_file(path, name)
        except MerkleMemoryError:
            continue


if __name__ == "__main__":
    run(target)
