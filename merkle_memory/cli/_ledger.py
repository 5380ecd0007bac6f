"""Subcommands of `merkle-memory` for this group (see ``register``)."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    """Add this group's subcommands to ``subparsers`` (none yet)."""
