"""Fixtures of the adversarial suite.

Every test here runs in CI at a size that fits the suite's time budget. Long soak variants
(more kills, more fuzz examples, longer races) are off by default. Turn them on with the
environment variable ``MERKLE_MEMORY_SOAK=1`` or the option ``--soak`` (registered in the root
``tests/conftest.py``: ``pytest_addoption`` only works there, not here).
"""

from __future__ import annotations

import pytest

from ._helpers import soak_enabled


@pytest.fixture
def soak(request: pytest.FixtureRequest) -> bool:
    """True when the long soak variants were asked for (``MERKLE_MEMORY_SOAK=1`` or ``--soak``)."""
    return soak_enabled(request.config)
