"""tests/assets cannot drift: the copies equal ../shared/vectors, and each has its provenance."""

from __future__ import annotations

import re
from pathlib import Path

from support import ASSETS, shared_path

README = ASSETS / "README.md"
UPSTREAM = "tlog_upstream/"  # copied straight from upstream test files: no ../shared counterpart
# The first cell of each row of the provenance table: one or more backticked paths.
_ROW = re.compile(r"^\| (`[^|]+`) \|", re.M)


def _files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` by its ``/``-separated relative path."""
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _copies() -> dict[str, Path]:
    """The copied vector files: every asset except this folder's own README."""
    files = _files(ASSETS)
    del files["README.md"]
    return files


def _shared_copies() -> dict[str, Path]:
    """The copies of ../shared/vectors: every copied file outside ``tlog_upstream/``."""
    return {name: path for name, path in _copies().items() if not name.startswith(UPSTREAM)}


def _readme_entries() -> list[str]:
    """The paths named in the first column of the README's provenance table."""
    return [p for cell in _ROW.findall(README.read_text()) for p in re.findall(r"`([^`]+)`", cell)]


def test_copies_are_byte_identical_to_shared_vectors() -> None:
    """Each file of ../shared/vectors is in tests/assets with the same bytes, and no other."""
    shared = _files(shared_path("vectors"))
    copies = _shared_copies()
    assert sorted(copies) == sorted(shared)
    differing = [
        name for name, path in copies.items() if path.read_bytes() != shared[name].read_bytes()
    ]
    assert differing == []


def test_every_asset_has_a_provenance_entry() -> None:
    """Every copied file is named in README.md (by its path or a folder), and every entry exists."""
    entries = _readme_entries()
    assert len(entries) >= 20
    missing = [
        name
        for name in _copies()
        if not any(name == e or (e.endswith("/") and name.startswith(e)) for e in entries)
    ]
    assert missing == []
    assert [e for e in entries if not (ASSETS / e).exists()] == []
