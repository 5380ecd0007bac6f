"""Helpers shared by the test packages: where the checkout, the test assets and ``../shared`` are.

Imported as ``support`` (``tests/`` is on ``sys.path``, see ``pythonpath`` in pyproject.toml).
Known-answer vectors are read from ``tests/assets/`` (copies of ``../shared/vectors``, see its
README.md), so a plain clone runs them; only the real third-party transcripts stay in
``../shared/real_inputs``, and the tests that read them skip when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "tests" / "assets"
SHARED = Path(os.environ.get("MERKLE_MEMORY_SHARED", REPO.parent / "shared"))


def asset_path(*parts: str) -> Path:
    """Return ``tests/assets/<parts>``; a missing asset fails the calling test (never a skip)."""
    path = ASSETS.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"missing test asset tests/assets/{'/'.join(parts)}", pytrace=False)
    return path


def shared_path(*parts: str) -> Path:
    """Return ``../shared/<parts>``, skipping the calling test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        where = "/".join(parts)
        pytest.skip(f"needs ../shared/{where} (the project's shared material), absent here")
    return path
