"""Shared fixtures and options; plain helpers and factories live in ``support.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from servers import archive_store, postgres_url, s3_server
from support import shared_path

__all__ = [
    "archive_store",
    "postgres_url",
    "s3_server",
]  # fixtures for the tests that need real servers


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--soak``: run the long soak variants of the adversarial suite (see its conftest)."""
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the long soak variants (more kills, fuzz examples, longer races); "
        "the same as MERKLE_MEMORY_SOAK=1",
    )


@pytest.fixture
def shared() -> Path:
    """The ``../shared`` folder; the test is skipped with a reason when it is absent."""
    return shared_path()
