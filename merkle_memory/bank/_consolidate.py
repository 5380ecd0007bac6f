"""Consolidation of memories of the bank (private; ``MemoryBank.consolidate``, DESIGN section 5).

Two steps under the bank lock: (1) write and seal one new memory whose links are
``mm://memory/<id>`` of each original; (2) archive the originals. Each step is durable before
the next starts, so a crash between them leaves a bank that verifies (the originals are still
active and sealed, the new memory is written and sealed). A rerun finds the new memory by what
the caller passed (type, scope, content and links; its timestamp would differ), seals it if
a crash came between its write and its seal, and only finishes the archiving.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import BankError, MemoryNotFoundError
from ._seal import seal_if_unsealed
from .memory import Memory, is_memory_id, memory_uri

if TYPE_CHECKING:
    from ._bank import MemoryBank

__all__ = ["consolidate"]


def _common(values: Iterable[str], what: str) -> str:
    found = sorted(set(values))
    if len(found) != 1:
        shown = ", ".join(repr(v)[:40] for v in found[:5])
        raise BankError(f"the memories differ in {what} ({shown}); pass {what} explicitly")
    return found[0]


def _find_existing(
    bank: MemoryBank, kind: str, scope: str, content: str, links: tuple[str, ...]
) -> Memory | None:
    """The earliest memory (active or archived) with this type, scope, content and links."""
    matches = [
        memory
        for memory, _archived, _rel in bank._scan(None)
        if (memory.type, memory.scope, memory.content, memory.links)
        == (kind, scope, content, links)
    ]
    return min(matches, key=lambda m: (m.timestamp, m.id), default=None)


def consolidate(
    bank: MemoryBank,
    ids: Sequence[str],
    content: str,
    *,
    type: str | None,
    scope: str | None,
    tags: Iterable[str],
    source_session: str | None,
    timestamp: datetime | None,
) -> str:
    """See :meth:`merkle_memory.bank.MemoryBank.consolidate`."""
    if isinstance(ids, (str, bytes)):
        raise BankError("consolidate takes a sequence of ids, not one string")
    wanted: list[str] = []
    for memory_id in ids:
        if not is_memory_id(memory_id):
            raise BankError(f"not a memory id (64 lowercase hex): {str(memory_id)[:80]!r}")
        wanted.append(memory_id)
    wanted = sorted(set(wanted))
    if not wanted:
        raise BankError("consolidate needs at least one memory id")
    if not isinstance(content, str):
        raise BankError(f"content must be a string, not {content.__class__.__name__}")
    bank._require_root()
    for memory_id in wanted:  # fail before the lock creates bank.lock
        if bank._find(memory_id) is None:
            raise MemoryNotFoundError(f"no memory {memory_id} in {bank.root}", memory_id)
    with bank._write_lock():
        originals = []
        for memory_id in wanted:
            found = bank._find(memory_id)
            if found is None:
                raise MemoryNotFoundError(f"no memory {memory_id} in {bank.root}", memory_id)
            originals.append(bank._load(found[0]))
        kind = type if type is not None else _common((m.type for m in originals), "type")
        where = scope if scope is not None else _common((m.scope for m in originals), "scope")
        links = tuple(memory_uri(i) for i in wanted)
        done = _find_existing(bank, kind, where, content, links)
        if done is None:
            done = Memory(
                kind,
                where,
                content,
                tuple(tags),
                timestamp if timestamp is not None else datetime.now(UTC),
                source_session,
                links,
            )
            bank._save_unlocked(done)
        else:
            # Found on a rerun: a crash may have come between its write and its seal.
            seal_if_unsealed(bank, done.id)
        for memory_id in wanted:
            bank._archive_unlocked(memory_id)
    return done.id
