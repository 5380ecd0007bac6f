"""Shared fixtures; plain helpers live in ``support.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import shared_path


@pytest.fixture
def shared() -> Path:
    """The ``../shared`` folder; the test is skipped with a reason when it is absent."""
    return shared_path()
