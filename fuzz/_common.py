"""Shared driver of the atheris targets (see README.md)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from merkle_memory.errors import MerkleMemoryError


def run(target: Callable[[bytes], None]) -> None:
    """Fuzz ``target``: any exception but a ``MerkleMemoryError`` is reported as a crash."""
    import atheris

    def one_input(data: bytes) -> None:
        with contextlib.suppress(MerkleMemoryError):
            target(data)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
