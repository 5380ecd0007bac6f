"""Strategies for tenants' ledgers, with tampering and torn tails (public through
:mod:`merkle_memory.strategies`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypedDict, cast

from hypothesis import strategies as st

from ._json import json_texts

if TYPE_CHECKING:
    from ..ledger.tenant import Tenant

SearchStrategy = st.SearchStrategy


class _RecordCore(TypedDict):
    id: str
    summary: str


class LedgerRecord(_RecordCore, total=False):
    """A memory record of a generated tenant: ``id`` and ``summary`` always, mnemo's other
    sealed fields (``key_facts``, ``decisions_made``, ``session_id``, ``agent_id``,
    ``timestamp``) and filing fields (``category``, ``tags``) when drawn."""

    session_id: str
    agent_id: str
    key_facts: list[str]
    decisions_made: list[str]
    timestamp: str
    category: str
    tags: list[str]


TAMPER_KINDS: Final = (
    "alter-record",
    "refile-record",
    "delete-record",
    "edit-line",
    "truncate",
    "torn-tail",
)
"""What :func:`materialize_ledger` can do to a sealed tenant, after sealing:

- ``alter-record``: change a sealed field (``summary``) of record ``target`` -> ``altered``.
- ``refile-record``: change a filing field (``category``) of record ``target`` -> still ok.
- ``delete-record``: delete record ``target``'s file -> ``missing``.
- ``edit-line``: change ``ts`` on ledger line ``target`` without rehashing -> chain broken at
  seq ``target + 1``.
- ``truncate``: cut the last ``target + 1`` lines, ``ledger.head`` still naming the last seq
  -> chain broken at the first seq the file lacks.
- ``torn-tail``: append the first ``target + 1`` bytes of a further entry line without its
  newline, as a crash mid-append would -> verify reports it as ``torn_tail`` (not an entry,
  the chain intact) and the next append quarantines it to ``ledger.torn``.
"""


@dataclass(frozen=True, slots=True)
class Tamper:
    """One change made to a tenant after its records were sealed.

    Attributes:
        kind: one of :data:`TAMPER_KINDS`.
        target: 0-based index: the record (``*-record``), the line (``edit-line``), the number
            of lines cut minus one (``truncate``) or of torn bytes minus one (``torn-tail``);
            always in range for the scenario it belongs to.
    """

    kind: str
    target: int


@dataclass(frozen=True, slots=True)
class LedgerScenario:
    """A description of a tenant: records saved (and sealed) in order, then others written
    without an entry, then at most one tamper.

    Attributes:
        sealed: record objects saved through ``Tenant.save`` in order (unique ids).
        unsealed: record objects written to ``memory/`` with no ledger entry.
        tamper: the change made afterwards, or ``None`` for an honest tenant.
    """

    sealed: tuple[LedgerRecord, ...]
    unsealed: tuple[LedgerRecord, ...]
    tamper: Tamper | None

    @property
    def sealed_ids(self) -> list[str]:
        """Ids of :attr:`sealed`, in order."""
        return [r["id"] for r in self.sealed]


_RECORD_IDS: Final = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)


def _as_record(drawn: dict[str, Any]) -> LedgerRecord:
    return cast("LedgerRecord", drawn)  # the keys and value types drawn just below


def _record(record_id: str) -> SearchStrategy[LedgerRecord]:
    text = json_texts(max_size=20)
    return st.fixed_dictionaries(
        {"id": st.just(record_id), "summary": text},
        optional={
            "session_id": st.sampled_from(["s1", "s2"]),
            "agent_id": st.just("cc"),
            "key_facts": st.lists(text, max_size=3),
            "decisions_made": st.lists(text, max_size=2),
            "timestamp": st.just("2026-09-01T00:00:00+00:00"),
            "category": st.sampled_from(["decision", "fact"]),
            "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2),
        },
    ).map(_as_record)


@st.composite
def _scenarios(
    draw: st.DrawFn, min_records: int, max_records: int, tamper: bool | None
) -> LedgerScenario:
    ids = draw(
        st.lists(_RECORD_IDS, min_size=min_records + 2, max_size=max_records + 3, unique=True)
    )
    n_sealed = draw(st.integers(min_records, min(max_records, len(ids) - 1)))
    n_sealed = max(n_sealed, 1 if tamper else 0)
    records = [draw(_record(i)) for i in ids]
    sealed, unsealed = records[:n_sealed], records[n_sealed : len(ids) - 1]
    chosen: Tamper | None = None
    if n_sealed and (tamper or (tamper is None and draw(st.booleans()))):
        kind = draw(st.sampled_from(TAMPER_KINDS))
        if kind == "truncate":
            target = draw(st.integers(0, n_sealed - 1))
        elif kind == "torn-tail":
            target = draw(st.integers(0, 150))
        else:
            target = draw(st.integers(0, n_sealed - 1))
        chosen = Tamper(kind, target)
    return LedgerScenario(tuple(sealed), tuple(unsealed), chosen)


def ledger_scenarios(
    *, min_records: int = 0, max_records: int = 6, tamper: bool | None = None
) -> SearchStrategy[LedgerScenario]:
    """Descriptions of a tenant folder (records and ledger), optionally tampered or torn.

    Materialize one with :func:`materialize_ledger`. Records carry mnemo's sealed fields
    (``summary``, ``key_facts``, ...) and filing fields (``category``, ``tags``).

    Args:
        min_records: fewest sealed records.
        max_records: most sealed records.
        tamper: ``True``: always one :class:`Tamper` (and at least one sealed record);
            ``False``: never; ``None``: either.

    Returns:
        A strategy of :class:`LedgerScenario`.

    Example:
        >>> from hypothesis import given
        >>> @given(ledger_scenarios(tamper=False))
        ... def test_honest_tenant_verifies(scenario):
        ...     with tempfile.TemporaryDirectory() as tmp:
        ...         tenant = materialize_ledger(scenario, tmp)
        ...         assert tenant.verify().ok
    """
    if tamper is False:
        return _scenarios(min_records, max(min_records, max_records), False)
    return _scenarios(min_records, max(min_records, max_records, 1), tamper)


def _rewrite(path: Path, data: bytes) -> None:
    os.chmod(path, 0o644)
    path.write_bytes(data)


def materialize_ledger(scenario: LedgerScenario, directory: str | os.PathLike[str]) -> Tenant:
    """Write a drawn scenario as a tenant folder and apply its tamper.

    Sealed records go through ``Tenant.save`` (record file, then its ledger line and
    ``ledger.head``); unsealed ones through ``records.write_record``; the tamper then edits
    the files directly, as an attacker or a crash would.

    Args:
        scenario: a drawn :class:`LedgerScenario`.
        directory: the tenant folder (created if missing; normally empty).

    Returns:
        The :class:`merkle_memory.ledger.Tenant` of ``directory``.

    Raises:
        ImportError: the ledger modules are not available in this version.
        MerkleMemoryError: a record the library refuses (cannot happen for drawn scenarios).
    """
    from ..ledger.records import record_path, write_record
    from ..ledger.tenant import Tenant

    tenant = Tenant(directory)
    tenant.root.mkdir(parents=True, exist_ok=True)
    for record in scenario.sealed:
        tenant.save(record)
    for record in scenario.unsealed:
        write_record(tenant.memory_dir, record)
    tamper = scenario.tamper
    if tamper is None:
        return tenant
    ledger = tenant.ledger.path
    if tamper.kind.endswith("-record"):
        record = scenario.sealed[tamper.target].copy()
        path = record_path(tenant.memory_dir, record["id"])
        if tamper.kind == "delete-record":
            path.unlink()
        else:
            if tamper.kind == "alter-record":
                record["summary"] = record["summary"] + " (edited)"
            else:
                record["category"] = str(record.get("category")) + " (edited)"
            from .. import canonical

            _rewrite(path, canonical.dumps(record))
    elif tamper.kind == "edit-line":
        from .. import canonical

        lines = ledger.read_bytes().splitlines(keepends=True)
        entry = canonical.loads(lines[tamper.target])
        assert isinstance(entry, dict)  # a line Tenant.save wrote
        ts = entry["ts"]
        assert isinstance(ts, int | float)
        entry["ts"] = ts + 1
        lines[tamper.target] = canonical.dumps(entry) + b"\n"
        _rewrite(ledger, b"".join(lines))
    elif tamper.kind == "truncate":
        lines = ledger.read_bytes().splitlines(keepends=True)
        _rewrite(ledger, b"".join(lines[: len(lines) - tamper.target - 1]))
    else:  # torn-tail: the start of one more entry line, cut mid-write
        from .. import canonical
        from ..ledger import GENESIS, Entry

        lines = ledger.read_bytes().splitlines()
        prev, seq = GENESIS, 1
        if lines:
            tail = canonical.loads(lines[-1])
            assert isinstance(tail, dict)  # a line Tenant.save wrote
            last_hash, last_seq = tail["hash"], tail["seq"]
            assert isinstance(last_hash, str) and isinstance(last_seq, int)
            prev, seq = last_hash, last_seq + 1
        line = Entry.create(seq, 1.5, "save", "torn-\u00e9", "ab" * 32, prev).line()
        with open(ledger, "ab") as handle:
            handle.write(line[: min(tamper.target + 1, len(line) - 1)])
    return tenant
