"""The progress callback that the library's long jobs accept (private; shared by every layer).

A long job (verifying or sealing a big ledger, verifying a node store, building a Merkle
sidecar, importing a big transcript, migrating a bank) takes an optional ``progress``
argument: a function called as ``progress(phase, done, total)`` from time to time while it
works, never from another thread. ``phase`` names what is being counted (``"records"``,
``"ledger"``...; each function's docstring lists its phases and their units), ``done`` is how
many units are finished so far and ``total`` how many there are, or ``None`` when that is not
known in advance. Calls come often enough to draw a progress line (at least once a megabyte
or every few hundred items, and once with ``done == total`` at the end of a phase) and cost
the job nothing when no callback is given. The library never draws anything itself: the
command line turns these calls into its progress line on a terminal's stderr.

A callback must be quick and must not raise; an exception it raises propagates and ends the
job (nothing is left half-written: every job is crash-safe at each step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias

__all__ = ["EVERY", "ProgressCallback"]

ProgressCallback: TypeAlias = Callable[[str, int, "int | None"], None]
"""``progress(phase, done, total)``: see the module docstring."""

EVERY: Final = 256
"""Item-counting phases call the callback once every this many items (and at the end)."""
