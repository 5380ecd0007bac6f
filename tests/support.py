"""Helpers shared by the test packages: where the checkout and ``../shared`` are.

Imported as ``support`` (``tests/`` is on ``sys.path``, see ``pythonpath`` in pyproject.toml).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MERKLE_MEMORY_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """Return ``../shared/<parts>``, skipping the calling test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        where = "/".join(parts)
        pytest.skip(f"needs ../shared/{where} (the project's shared material), absent here")
    return path
