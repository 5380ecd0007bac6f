"""``witness_ledger`` and ``ledger_bundle`` on a folder and on a PostgreSQL tenant (issue 19
item 4): the same ledger gives the same ``ledger.cosigned`` and ``ledger.witnesses`` bytes
and the same offline bundle on both backends. The PostgreSQL cases need the test server
(tests/servers.py); the witness is the in-process ``WitnessServer`` on loopback.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from merkle_memory.checkpoint import Checkpoint, WitnessPolicy, sign_checkpoint
from merkle_memory.errors import LedgerError
from merkle_memory.ledger import FolderLedgerStore, Ledger, LedgerStore, PostgresLedgerStore
from merkle_memory.signed_note import HmacKey
from merkle_memory.tlog import Witness, WitnessServer, witness_ledger
from merkle_memory.tlog.publish import (
    COSIGNED_NAME,
    WITNESS_STATE_NAME,
    ledger_bundle,
    verify_ledger_bundle,
)

pytest.importorskip("cryptography", reason="cosignatures need the optional extra 'ed25519'")
from merkle_memory.signed_note import CosignatureSigner

KEY = HmacKey("example.com/agents", bytes(range(32)))
ORIGIN = "example.com/agents/cc"
WITNESS = CosignatureSigner("witness.example/w1", bytes(range(5, 37))).at(1_796_000_000)
TS = 1_700_000_000.0


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> LedgerStore:
    if kind == "folder":
        (tmp_path / "cc").mkdir()
        return FolderLedgerStore(tmp_path / "cc" / "ledger.jsonl")
    return PostgresLedgerStore(request.getfixturevalue("postgres_url") + "#cc")


def _grow(store: LedgerStore, first: int, count: int) -> None:
    Ledger(store).append_many(
        [(f"note-{i}", hashlib.sha256(b"%d" % i).hexdigest()) for i in range(first, count)],
        ts=TS,
    )


def _witness_twice(store: LedgerStore, tmp_path: Path) -> list[tuple[bytes, bytes]]:
    """Witness a ledger of 5 entries, grow it to 9, witness it again (its own witness
    database); ``(ledger.cosigned, ledger.witnesses)`` after each run."""
    witness = Witness(tmp_path / f"w-{id(store)}.db", WITNESS, {ORIGIN: [KEY]})
    seen: list[tuple[bytes, bytes]] = []
    with WitnessServer(witness) as server:
        for first, count in ((0, 5), (5, 9)):
            _grow(store, first, count)
            note = witness_ledger(
                store, ORIGIN, [KEY], server.url, witness_keys=[WITNESS.verifier()]
            )
            cosigned = store.read_side_file(COSIGNED_NAME)
            state = store.read_side_file(WITNESS_STATE_NAME)
            assert cosigned is not None and state is not None
            assert cosigned == note.encode()
            seen.append((cosigned, state.replace(server.url.encode(), b"URL")))
        # the second run sent old size 5, the size the witness held (no 409 retry)
        assert [size for size, _ in witness.history(ORIGIN)] == [5, 9]
    return seen


@pytest.fixture
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[LedgerStore]]:
    """A folder store and a database store, each named ``cc``."""
    yield [_store(kind, tmp_path / kind, request) for kind in ("folder", "postgres")]


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    for kind in ("folder", "postgres"):
        (tmp_path / kind).mkdir()


def test_witness_keeps_the_same_bytes_on_both_backends(
    both: list[LedgerStore], tmp_path: Path
) -> None:
    """The same 9 entries witnessed in two runs: ``ledger.cosigned`` and ``ledger.witnesses``
    are byte-identical on a folder and in a database after each run, the state naming the
    size cosigned."""
    runs = [_witness_twice(store, tmp_path) for store in both]
    assert runs[0] == runs[1]
    (_c5, state5), (cosigned9, state9) = runs[0]
    assert (state5, state9) == (b'{"URL": 5}\n', b'{"URL": 9}\n')
    lines = cosigned9.decode().splitlines()
    assert lines[:2] == [ORIGIN, "9"]
    assert [line.split()[1] for line in lines[4:]] == ["example.com/agents", "witness.example/w1"]


def test_a_bundle_is_the_same_on_both_backends_and_carries_the_cosignature(
    both: list[LedgerStore], tmp_path: Path
) -> None:
    """After witnessing, ``ledger_bundle`` of a database tenant carries the cosigned
    checkpoint kept in its row, verifies offline under a 1-of-1 witness policy and equals the
    folder's bundle text; an entry the cosigned checkpoint does not cover gets a fresh one."""
    bundles = []
    late = []
    for store in both:
        _witness_twice(store, tmp_path)
        bundles.append(ledger_bundle(store, "note-3", ORIGIN, [KEY]).to_text())
        _grow(store, 9, 10)
        late.append(ledger_bundle(store, "note-9", ORIGIN, [KEY]).to_text())
    assert bundles[0] == bundles[1] and late[0] == late[1]
    policy = WitnessPolicy((WITNESS.verifier(),), 1)
    checkpoint, entry = verify_ledger_bundle(
        bundles[1], [KEY], origin=ORIGIN, policy=policy, memory_id="note-3"
    )
    assert (checkpoint.size, entry.seq) == (9, 4)
    checkpoint, entry = verify_ledger_bundle(late[1], [KEY], origin=ORIGIN, memory_id="note-9")
    assert (checkpoint.size, entry.seq) == (10, 10)


def test_a_missing_database_tenant_is_named(postgres_url: str) -> None:
    """``witness_ledger`` and ``ledger_bundle`` on a URL naming no tenant: one
    ``LedgerError`` naming it, nothing created."""
    url = postgres_url + "#nobody"
    label = PostgresLedgerStore(url).label
    with pytest.raises(LedgerError) as caught:
        witness_ledger(url, ORIGIN, [KEY], "http://127.0.0.1:9")
    assert str(caught.value) == f"{label}: no tenant 'nobody' in the database"
    with pytest.raises(LedgerError) as caught:
        ledger_bundle(url, "note-1", ORIGIN, [KEY])
    assert str(caught.value) == f"{label}: no tenant 'nobody' in the database"
    assert not PostgresLedgerStore(url).exists()


def test_a_cosigned_checkpoint_of_another_history_is_reported(
    both: list[LedgerStore], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``ledger.cosigned`` that covers the entry but holds another history (as after a
    rollback and a different save at that seq) is not used, and not dropped in silence:
    one warning naming the file, its tree size and the entry; the bundle carries a fresh,
    uncosigned checkpoint of the current tree. Same on both backends."""
    fresh = []
    for store in both:
        _witness_twice(store, tmp_path)
        forged = sign_checkpoint(Checkpoint(ORIGIN, 9, bytes(32)), [KEY])
        store.write_side_file(COSIGNED_NAME, forged.encode())
        caplog.clear()
        with caplog.at_level("WARNING", logger="merkle_memory.tlog"):
            bundle = ledger_bundle(store, "note-3", ORIGIN, [KEY])
        assert [r.getMessage() for r in caplog.records] == [
            f"{store.label}: ledger.cosigned (tree size 9) does not hold entry 4 of this"
            " ledger as it is now: the witnessed history differs from this ledger's (a"
            " rollback or a fork since it was cosigned, or a damaged sidecar); the bundle"
            " carries a fresh checkpoint that no witness cosigned"
        ]
        checkpoint, entry = verify_ledger_bundle(bundle, [KEY], origin=ORIGIN, memory_id="note-3")
        assert (checkpoint.size, entry.seq) == (9, 4)
        assert checkpoint.root != bytes(32)
        fresh.append(bundle.to_text())
    assert fresh[0] == fresh[1]
