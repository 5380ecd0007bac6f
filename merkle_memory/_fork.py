"""Thread locks a forked child must renew: one ``os.register_at_fork`` for the package.

After ``fork()`` only the forking thread runs in the child, but every lock is copied as it
was, so one that another thread of the parent held stays held for ever there. An object that
keeps such locks (a ``Ledger``, a ``FolderLedgerStore``, a PostgreSQL ``Pool``, the import's
collector pause) calls :func:`renew_in_child` once, from its ``__init__``; in every child
forked while it lives, its ``_after_fork_in_child()`` then runs in the forking thread before
``fork`` returns there.
"""

from __future__ import annotations

import os
import weakref
from typing import Final, Protocol

__all__ = ["Renewable", "renew_in_child"]


class Renewable(Protocol):
    """What :func:`renew_in_child` calls in a forked child."""

    def _after_fork_in_child(self) -> None:
        """Make the object usable by the child's only thread (new locks, the parent's other
        threads' state forgotten). Must not raise."""
        ...  # pragma: no cover - a protocol


_LIVE: Final[weakref.WeakSet[Renewable]] = weakref.WeakSet()


def renew_in_child(obj: Renewable) -> None:
    """Call ``obj._after_fork_in_child()`` in every child forked from now on while ``obj``
    lives (it is held weakly: registering never keeps an object alive)."""
    _LIVE.add(obj)


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
