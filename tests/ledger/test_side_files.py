"""Files beside a ledger on both backends (issue 19 item 4): ``ledger.cosigned``,
``ledger.witnesses`` and the recovery records of an accepted rollback, through the seam
(``LedgerStore.side_files`` / ``read_side_file`` / ``write_side_file`` / ``remove_head``).

Every scenario runs on a folder and on a PostgreSQL tenant and asserts the same values; the
PostgreSQL cases need the test server (tests/servers.py). A database tenant accepts a
rollback in one transaction: a failure anywhere inside it leaves the rollback refused and no
record, never half.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import admin
from support import Recorder

from merkle_memory import canonical
from merkle_memory.errors import LedgerError, LedgerRollbackError
from merkle_memory.ledger import (
    FolderLedgerStore,
    Ledger,
    LedgerStore,
    PostgresLedgerStore,
    export_tenant,
    import_tenant,
    open_tenant,
)
from merkle_memory.ledger.proofs import sync
from merkle_memory.ledger.recovery import (
    RollbackRecovery,
    accept_rollback,
    recovery_record_names,
)
from merkle_memory.ledger.storage import Head

TS = 1_789_851_200.5
NOW = 1_796_000_000.25
IDS = ["m1", "m2", "m3", "m4"]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Side:
    """One tenant's ledger on one backend, with an intruder's access to its storage."""

    def __init__(self, kind: str, where: Path | str) -> None:
        self.kind = kind
        self.where = where
        self.target: Path | str = (
            Path(where) / "cc" / "ledger.jsonl" if kind == "folder" else f"{where}#cc"
        )

    def store(self) -> LedgerStore:
        if isinstance(self.target, Path):
            return FolderLedgerStore(self.target)
        return PostgresLedgerStore(self.target)

    def ledger(self) -> Ledger:
        return Ledger(self.store())

    def cut(self, keep: int) -> None:
        """Keep only the first ``keep`` lines of the ledger (the head row or file untouched)."""
        if isinstance(self.target, Path):
            lines = self.target.read_bytes().splitlines(keepends=True)
            self.target.write_bytes(b"".join(lines[:keep]))
            return
        with admin(str(self.where)) as conn:
            starts = [
                int(row[0])
                for row in conn.execute("SELECT start FROM mm_ledger_lines ORDER BY start")
            ]
            end = starts[keep] if keep < len(starts) else None
            assert end is not None
            conn.execute("DELETE FROM mm_ledger_lines WHERE start >= %s", (end,))
            conn.execute("UPDATE mm_tenants SET size = %s", (end,))


@pytest.fixture(params=["folder", "postgres"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    """A tenant ``cc`` on each backend (PostgreSQL: a fresh schema of the test server)."""
    if request.param == "folder":
        yield Side("folder", tmp_path)
    else:
        yield Side("postgres", request.getfixturevalue("postgres_url"))


def _four(side: Side) -> list[str]:
    """Four entries (fixed ids and time), the sidecar synced; their hashes."""
    ledger = side.ledger()
    for mid in IDS:
        ledger.append(mid, _digest(mid), ts=TS)
    sync(ledger)
    return [e.hash for e in ledger.entries()]


def test_side_files_round_trip_and_refuse_other_names(side: Side) -> None:
    """Written bytes read back exactly, replaced whole by a second write, listed by name;
    a name outside ``SIDE_FILE_NAME`` (a path, a file of the store) is refused by every call."""
    _four(side)
    store = side.store()
    assert (store.side_files(), store.read_side_file("ledger.cosigned")) == ([], None)
    store.write_side_file("ledger.witnesses", b'{"http://w":3}\n')
    store.write_side_file("ledger.cosigned", b"first\n")
    store.write_side_file("ledger.cosigned", b"second \xff\n")
    store.write_side_file("ledger.recovery-12.json", b"{}\n")
    store.write_side_file("ledger.recovery-2.json", b"[]\n")
    assert store.side_files() == [
        "ledger.cosigned",
        "ledger.recovery-12.json",
        "ledger.recovery-2.json",
        "ledger.witnesses",
    ]
    assert store.read_side_file("ledger.cosigned") == b"second \xff\n"
    assert recovery_record_names(store) == ["ledger.recovery-2.json", "ledger.recovery-12.json"]
    label = store.label
    for bad in ("ledger.head", "ledger.jsonl", "../ledger.cosigned", "ledger.recovery-0.json"):
        for call in (store.read_side_file, lambda n: store.write_side_file(n, b"x")):
            with pytest.raises(LedgerError) as caught:
                call(bad)
            assert str(caught.value) == f"{label}: not a file kept beside the ledger: {bad!r}"
    if isinstance(side.target, Path):
        folder = side.target.parent
        mode = stat.S_IMODE(os.stat(folder / "ledger.recovery-2.json").st_mode)
        assert (mode, (folder / "ledger.cosigned").read_bytes()) == (0o444, b"second \xff\n")


def test_a_folder_side_file_is_durable_before_it_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder store writes a temp file, fsyncs it, renames it over the name, then fsyncs
    the folder: never a partial ``ledger.cosigned``."""
    store = FolderLedgerStore(tmp_path / "cc" / "ledger.jsonl")
    (tmp_path / "cc").mkdir()
    recorder = Recorder(monkeypatch)
    store.write_side_file("ledger.cosigned", b"note\n")
    monkeypatch.undo()
    assert recorder.calls == [
        ("open", "ledger.cosigned~tmp"),
        ("fsync", "ledger.cosigned~tmp"),
        ("replace", "ledger.cosigned~tmp->ledger.cosigned"),
        ("open", "cc"),
        ("fsync", "cc"),
    ]


def _record(side: Side, name: str) -> dict[str, Any]:
    data = side.store().read_side_file(name)
    assert data is not None and data.endswith(b"\n")
    value = canonical.loads(data[:-1])
    assert isinstance(value, dict) and canonical.dumps(value) + b"\n" == data
    return value


def test_an_accepted_rollback_keeps_the_same_record_on_both_backends(
    postgres_url: str, tmp_path: Path
) -> None:
    """Four entries cut back to two on a folder and in a database: both refuse the append,
    both accept the rollback with the same report and a record of the same bytes (but the
    old head's fingerprint, which names the storage), then continue at seq 3 with the same
    entry."""
    folder, database = Side("folder", tmp_path), Side("postgres", postgres_url)
    hashes = _four(folder)
    assert _four(database) == hashes
    records: list[dict[str, Any]] = []
    for side in (folder, database):
        side.cut(2)
        with pytest.raises(LedgerRollbackError):
            side.ledger().append("m5", _digest("m5"), ts=TS)
        done = accept_rollback(side.target, now=NOW)
        assert done is not None
        assert done.to_dict() == {
            "record": "ledger.recovery-1.json",
            "head": {"seq": 4, "hash": hashes[3]},
            "on_disk_seq": 2,
            "lacking": [3, 4],
            "reused": False,
        }
        assert recovery_record_names(side.store()) == ["ledger.recovery-1.json"]
        records.append(_record(side, "ledger.recovery-1.json"))
        assert side.ledger().append("m5", _digest("m5"), ts=TS).seq == 3
        assert accept_rollback(side.target) is None  # nothing more to accept
    on_folder, in_database = records
    tenant_id = PostgresLedgerStore(str(database.target)).tenant_id()
    assert in_database["head"]["fingerprint"] == f"postgresql:{tenant_id}"
    in_database["head"]["fingerprint"] = on_folder["head"]["fingerprint"]
    assert in_database == on_folder
    assert (on_folder["kind"], on_folder["accepted_at"], on_folder["ledger"]) == (
        "accepted-rollback",
        NOW,
        "ledger.jsonl",
    )
    assert [(x["seq"], x["hash"]) for x in on_folder["lacking"]] == [(3, None), (4, hashes[3])]
    assert list(folder.ledger().entries()) == list(database.ledger().entries())


@pytest.mark.parametrize("fail_in", ["clear_sidecar", "write_sidecar_state", "write_head"])
def test_a_failure_inside_the_database_transaction_leaves_the_rollback_refused(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, fail_in: str
) -> None:
    """A failure after the record row was written and before the commit rolls the whole
    transaction back: no record, the old head, the append still refused; a rerun then
    accepts it with record 1."""
    side = Side("postgres", postgres_url)
    hashes = _four(side)
    side.cut(2)
    store = side.store()
    assert isinstance(store, PostgresLedgerStore)

    def boom(*_args: object) -> None:
        assert store.side_files() == ["ledger.recovery-1.json"]  # inside the transaction
        raise RuntimeError(f"killed in {fail_in}")

    monkeypatch.setattr(store, fail_in, boom)
    with pytest.raises(RuntimeError, match=f"killed in {fail_in}"):
        accept_rollback(Ledger(store), now=NOW)
    monkeypatch.undo()
    fresh = side.store()
    assert fresh.side_files() == []
    head = fresh.read_head()
    assert head is not None and (head.seq, head.hash) == (4, hashes[3])
    with pytest.raises(LedgerRollbackError):
        side.ledger().append("m5", _digest("m5"), ts=TS)
    done = accept_rollback(side.target, now=NOW)
    assert isinstance(done, RollbackRecovery)
    assert (done.record, done.reused, done.on_disk_seq) == (
        Path("ledger.recovery-1.json"),
        False,
        2,
    )
    assert side.ledger().append("m5", _digest("m5"), ts=TS).seq == 3


def test_a_rollback_to_nothing_removes_the_head_on_both_backends(side: Side) -> None:
    """Every line gone: the record says 0 entries, the head is removed (``remove_head``),
    and the next append is seq 1 after GENESIS."""
    hashes = _four(side)
    if isinstance(side.target, Path):
        side.target.write_bytes(b"")
    else:
        with admin(str(side.where)) as conn:
            conn.execute("DELETE FROM mm_ledger_lines")
            conn.execute("UPDATE mm_tenants SET size = 0")
    done = accept_rollback(side.target, now=NOW)
    assert done is not None and (done.on_disk_seq, done.lacking) == (0, (1, 2, 3, 4))
    record = _record(side, "ledger.recovery-1.json")
    assert (record["on_disk"], record["head"]["hash"]) == (
        {"entries": 0, "hash_at_head_seq": None, "last_hash": None, "size": 0, "torn_tail": None},
        hashes[3],
    )
    assert side.store().read_head() is None
    entry = side.ledger().append("m9", _digest("m9"), ts=TS)
    assert (entry.seq, entry.prev) == (1, "0" * 64)


def test_remove_head_needs_the_write_lock(postgres_url: str, tmp_path: Path) -> None:
    """``remove_head`` outside a write block is refused on a database tenant; the folder
    store's unlinks ``ledger.head`` (and is a no-op when there is none)."""
    store = PostgresLedgerStore(postgres_url + "#cc")
    with pytest.raises(LedgerError, match="remove_head outside a locked"):
        store.remove_head()
    folder = FolderLedgerStore(tmp_path / "ledger.jsonl")
    folder.write_head(Head(1, "a" * 64))
    folder.remove_head()
    folder.remove_head()
    assert (folder.read_head(), (tmp_path / "ledger.head").exists()) == (None, False)


def test_export_and_import_carry_the_files_beside_the_ledger(
    postgres_url: str, tmp_path: Path
) -> None:
    """A folder holding ``ledger.cosigned``, ``ledger.witnesses`` and a recovery record moves
    into a database and back: the same bytes under the same names (the record read-only),
    and the same verify report at each step."""
    source = Side("folder", tmp_path / "a")
    _four(source)
    source.cut(3)
    assert accept_rollback(source.target, now=NOW) is not None
    store = source.store()
    store.write_side_file("ledger.cosigned", b"cosigned note\n")
    store.write_side_file("ledger.witnesses", b'{"http://w":3}\n')
    folder = source.target.parent if isinstance(source.target, Path) else Path()
    before = {n: store.read_side_file(n) for n in store.side_files()}
    assert sorted(before) == ["ledger.cosigned", "ledger.recovery-1.json", "ledger.witnesses"]
    url = postgres_url + "#moved"
    moved = import_tenant(folder, url)
    assert {n: moved.store.read_side_file(n) for n in moved.store.side_files()} == before
    back = export_tenant(url, tmp_path / "back")
    assert {n: (back / n).read_bytes() for n in before} == before
    assert stat.S_IMODE(os.stat(back / "ledger.recovery-1.json").st_mode) == 0o444
    reports = [open_tenant(where).verify().to_dict() for where in (folder, url, back)]
    assert reports[0] == reports[1] == reports[2]
    assert json.loads(json.dumps(reports[0]))["entries"] == 3


def test_a_database_without_the_files_table_reads_none_and_installs_it_on_write(
    postgres_url: str,
) -> None:
    """Component ``ledger_files`` is installed by the first write of a side file only: a
    tenant's appends leave it absent (and reading lists nothing); the write records version
    1 in ``mm_schema``; another version is refused."""
    side = Side("postgres", postgres_url)
    _four(side)

    def components() -> dict[str, int]:
        with admin(postgres_url) as conn:
            rows = conn.execute("SELECT component, version FROM mm_schema").fetchall()
        return {str(c): int(v) for c, v in rows}

    assert "ledger_files" not in components()
    store = side.store()
    assert (store.side_files(), store.read_side_file("ledger.witnesses")) == ([], None)
    store.write_side_file("ledger.witnesses", b"{}\n")
    assert components()["ledger_files"] == 1
    with admin(postgres_url) as conn:
        conn.execute("UPDATE mm_schema SET version = 2 WHERE component = 'ledger_files'")
    with pytest.raises(Exception, match="ledger_files schema version 2, this library reads"):
        side.store().side_files()
