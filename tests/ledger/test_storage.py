"""The ledger's storage seam: append, recover, verify, seal and prove run unchanged on any store
(the folder, an in-memory double, and PostgreSQL when the test server is there).

``MemoryLedgerStore`` below is a second, tiny implementation of
:class:`~merkle_memory.ledger.storage.LedgerStore` (bytes in memory, a ``threading`` lock).
Every test runs the same public code on it and on the folder store, and checks that both give
the same bytes, the same reports and the same proofs: the seam carries everything.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import rfc6962
from merkle_memory.errors import (
    LedgerBrokenError,
    LedgerError,
    LedgerFormatError,
    LedgerRollbackError,
)
from merkle_memory.ledger import (
    FolderLedgerStore,
    Head,
    Holdings,
    Ledger,
    LedgerFile,
    LedgerStore,
    PostgresLedgerStore,
    seal_if_unsealed,
    seal_unsealed,
    verify_ledger,
)
from merkle_memory.ledger.proofs import check, prove_consistency, prove_inclusion, tree_head
from merkle_memory.ledger.treelog import TreeLogCheck

TS = 1789851200.5


class _MemoryFile(LedgerFile):
    def __init__(self, store: MemoryLedgerStore, writable: bool) -> None:
        self.store, self.writable = store, writable

    def size(self) -> int:
        return len(self.store.data)

    def read(self, offset: int, length: int) -> bytes:
        return bytes(self.store.data[offset : offset + length])

    def fingerprint(self) -> str:
        """The bytes' own digest: exact for a test double (a real store gives a stat)."""
        return hashlib.sha256(self.store.data).hexdigest()

    def append(self, offset: int, data: bytes) -> None:
        if not self.writable:
            raise LedgerError("read-only")
        self.store.data[offset:] = data

    def quarantine(self, offset: int, fragment: bytes) -> None:
        if not self.writable:
            raise LedgerError("read-only")
        self.store.torn.append((offset, fragment))
        del self.store.data[offset:]

    @contextlib.contextmanager
    def shared_lock(self) -> Iterator[None]:
        with self.store.lock:
            yield


class _MemorySidecar:
    def __init__(self, leaves: list[bytes]) -> None:
        self.leaves = leaves

    def __len__(self) -> int:
        return len(self.leaves)

    def __getitem__(self, index: int, /) -> bytes:
        return self.leaves[index]

    def root(self, size: int | None = None) -> bytes:
        return rfc6962.root(self.leaves[: len(self.leaves) if size is None else size])

    def check(self, leaf_data: Iterable[bytes]) -> TreeLogCheck:
        expected = [rfc6962.hash_leaf(d) for d in leaf_data]
        pairs = enumerate(zip(expected, self.leaves, strict=False))
        bad = next((i for i, (a, b) in pairs if a != b), None)
        if bad is None and len(expected) != len(self.leaves):
            bad = min(len(expected), len(self.leaves))
        return TreeLogCheck(bad is None, len(expected), len(self.leaves), bad)


class MemoryLedgerStore(LedgerStore):
    """A ledger in memory: the whole interface, nothing durable (a test double)."""

    def __init__(self) -> None:
        self.data: bytearray | None = None
        self.head: Head | None = None
        self.torn: list[tuple[int, bytes]] = []
        self.leaves: list[bytes] = []
        self.state: bytes | None = None
        self.lock = threading.RLock()

    @property
    def label(self) -> str:
        return "memory"

    def exists(self) -> bool:
        return self.data is not None

    @contextlib.contextmanager
    def locked(self, *, write: bool) -> Iterator[LedgerFile]:
        if self.data is None:
            if not write:
                raise FileNotFoundError("memory")
            self.data = bytearray()
        with self.lock:
            yield _MemoryFile(self, write)

    @contextlib.contextmanager
    def reader(self) -> Iterator[LedgerFile | None]:
        yield None if self.data is None else _MemoryFile(self, False)

    def read_head(self) -> Head | None:
        return self.head

    def write_head(self, head: Head) -> None:
        self.head = head

    def sidecar(self) -> _MemorySidecar:
        return _MemorySidecar(list(self.leaves))

    def append_sidecar(self, leaf_hashes: Sequence[bytes]) -> None:
        self.leaves.extend(leaf_hashes)

    def truncate_sidecar(self, leaves: int) -> None:
        del self.leaves[leaves:]

    def clear_sidecar(self) -> None:
        self.leaves = []

    def read_sidecar_state(self) -> bytes | None:
        return self.state

    def write_sidecar_state(self, data: bytes) -> None:
        self.state = data


Backend = Callable[[Path], LedgerStore]
BACKENDS: dict[str, Backend] = {
    "folder": lambda tmp: FolderLedgerStore(tmp / "ledger.jsonl"),
    "memory": lambda tmp: MemoryLedgerStore(),
}


def _bytes(store: LedgerStore) -> bytes:
    with store.reader() as file:
        return b"" if file is None else file.read(0, file.size())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _fill(store: LedgerStore, n: int) -> Ledger:
    led = Ledger(store)
    led.append("m0", _digest("m0"), ts=TS)
    led.append_many([(f"m{i}", _digest(f"m{i}")) for i in range(1, n)], ts=TS)
    return led


@pytest.fixture(params=[*sorted(BACKENDS), "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerStore:
    """Each store the seam is tested on (PostgreSQL needs the test server, tests/servers.py)."""
    if request.param == "postgres":
        return PostgresLedgerStore(request.getfixturevalue("postgres_url") + "#seam")
    return BACKENDS[request.param](tmp_path)


def test_every_store_holds_the_same_bytes_head_and_report(
    store: LedgerStore, tmp_path: Path
) -> None:
    """Appends through any store write the bytes and head the folder store writes, and
    verify reports the same on them."""
    reference = FolderLedgerStore(tmp_path / "ref" / "ledger.jsonl")
    _fill(reference, 7)
    _fill(store, 7)
    assert _bytes(store) == _bytes(reference)
    last = Ledger(store).last()
    expected = (7, last.hash if last is not None else None, len(_bytes(store)))
    for head in (store.read_head(), reference.read_head()):
        assert head is not None and (head.seq, head.hash, head.end) == expected
    testimony = {f"m{i}": _digest(f"m{i}") for i in range(7)} | {"m3": _digest("x"), "u": "00"}
    report = verify_ledger(store, testimony).to_dict()
    assert report == verify_ledger(reference, testimony).to_dict()
    assert (report["chain"], report["altered"], report["unsealed"]) == ("intact", ["m3"], ["u"])
    assert [e.seq for e in Ledger(store).entries(check_hash=True)] == list(range(1, 8))


def test_a_torn_tail_is_quarantined_through_the_store(store: LedgerStore) -> None:
    """A fragment after the last line is a torn tail to verify (not an entry), moved aside by
    the next append through ``LedgerFile.quarantine``; the chain continues from the last entry."""
    led = _fill(store, 3)
    whole = _bytes(store)
    with store.locked(write=True) as file:
        file.append(len(whole), b'{"seq":4,"ts":1')
    torn = verify_ledger(store, {})
    assert (torn.chain, torn.entries, torn.torn_tail) == ("intact", 3, (len(whole), 15))
    assert led.recover() is not None and _bytes(store) == whole
    assert led.append("m3", _digest("m3"), ts=TS).seq == 4
    assert verify_ledger(store, {}).chain == "intact"


def test_a_rollback_is_refused_through_the_store(store: LedgerStore) -> None:
    """A store whose bytes went behind its head refuses the next append."""
    _fill(store, 4)
    whole = _bytes(store)
    cut = whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1]
    with store.locked(write=True) as file:
        file.quarantine(len(cut), b"")  # cut the last entry away
    assert _bytes(store) == cut
    with pytest.raises(LedgerRollbackError):
        Ledger(store).append("late", _digest("late"))
    assert verify_ledger(store, {}).chain == "broken"


def test_seal_runs_on_any_store(store: LedgerStore) -> None:
    """seal_unsealed and seal_if_unsealed decide and append through the store alone."""
    led = _fill(store, 2)
    held = {"m0": _digest("m0"), "m1": _digest("m1"), "b": _digest("b"), "a": _digest("a")}
    report = seal_unsealed(led, lambda: Holdings(held, held), label="t")
    assert report.sealed_ids == ("a", "b") and report.report.chain == "intact"
    assert not seal_if_unsealed(led, "a", _digest("a"))
    assert seal_if_unsealed(led, "c", _digest("c"))
    assert verify_ledger(store, held | {"c": _digest("c")}).sealed == 5


def test_seal_if_unsealed_finds_only_the_id_itself(store: LedgerStore) -> None:
    """The fast path's byte search is for the id's RFC 8785 string: an id holding ``"`` is
    not taken as sealed by the line of a shorter id (``a","op":"save`` by ``a``'s line), an
    id written escaped or with a backslash is decided by verify, and an id with no RFC 8785
    form (a lone surrogate) is refused by the append, never with a ``UnicodeEncodeError``."""
    led = Ledger(store)
    led.append("a", _digest("a"))
    led.append("b\\", _digest("b"))
    quoted = 'a","op":"save'
    assert seal_if_unsealed(led, quoted, _digest("q"))
    assert not seal_if_unsealed(led, quoted, _digest("q"))
    assert not seal_if_unsealed(led, "b\\", _digest("b"))
    assert [(e.seq, e.memory_id) for e in led.entries()] == [(1, "a"), (2, "b\\"), (3, quoted)]
    with pytest.raises(LedgerFormatError, match="lone surrogate"):
        seal_if_unsealed(led, "x\ud800", _digest("x"))
    assert verify_ledger(store, {}).entries == 3


def test_seal_refuses_a_broken_chain_on_any_store(store: LedgerStore) -> None:
    """An adoption onto a broken chain is refused, whatever the store."""
    led = _fill(store, 2)
    with store.locked(write=True) as file:
        file.append(file.size(), b"not an entry\n")
    with pytest.raises(LedgerBrokenError):
        seal_unsealed(led, lambda: Holdings({"z": _digest("z")}, {"z": _digest("z")}), label="t")


def test_proofs_are_served_from_any_store(store: LedgerStore, tmp_path: Path) -> None:
    """Inclusion, consistency and the tree head are the same on every store, and the sidecar
    sync state the store keeps covers every entry."""
    reference = FolderLedgerStore(tmp_path / "ref" / "ledger.jsonl")
    _fill(reference, 11)
    _fill(store, 11)
    got = (
        prove_inclusion(store, "m4").to_dict(),
        prove_consistency(store, 5).to_dict(),
        tree_head(store, "o.example/t").to_text(),
    )
    want = (
        prove_inclusion(reference, "m4").to_dict(),
        prove_consistency(reference, 5).to_dict(),
        tree_head(reference, "o.example/t").to_text(),
    )
    assert got == want
    assert len(store.sidecar()) == 11 and store.read_sidecar_state() is not None
    assert check(store)
    Ledger(store).append("m11", _digest("m11"), ts=TS)
    assert prove_inclusion(store, "m11").tree_size == 12


def test_proofs_read_subtree_roots_not_every_leaf(
    store: LedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proof reads O(log n) hashes from a store's sidecar: two leaves (the last, checked
    against the ledger's last entry, and the proven entry's) and perfect-subtree roots (the
    PostgreSQL sidecar read every leaf of each subtree, one query each: seconds at 30,000
    entries); the proofs equal the folder store's at every size tried. The test double
    ``memory`` keeps leaves only: its proofs read them (a leaf source, ``proof.LeafSource``)."""
    n = 1000
    reference = FolderLedgerStore(tmp_path / "ref" / "ledger.jsonl")
    _fill(reference, n)
    _fill(store, n)
    mids, olds = ("m0", "m1", "m500", "m998", "m999"), (1, 2, 3, 500, 512, 999)
    want = [prove_inclusion(reference, mid).to_dict() for mid in mids]
    want += [prove_consistency(reference, old).to_dict() for old in olds]
    prove_inclusion(store, "m0")  # builds the sidecar
    sidecar_type = type(store.sidecar())
    leaf_reads: list[int] = []
    read_leaf = sidecar_type.__getitem__

    def counting(self: Any, index: int) -> bytes:
        leaf_reads.append(index)
        return read_leaf(self, index)

    monkeypatch.setattr(sidecar_type, "__getitem__", counting)
    got, reads = [], []
    for mid in mids:
        leaf_reads.clear()
        got.append(prove_inclusion(store, mid).to_dict())
        reads.append(len(leaf_reads) if isinstance(store, MemoryLedgerStore) else leaf_reads[:])
    for old in olds:
        leaf_reads.clear()
        got.append(prove_consistency(store, old).to_dict())
        reads.append(len(leaf_reads) if isinstance(store, MemoryLedgerStore) else leaf_reads[:])
    assert got == want
    if isinstance(store, MemoryLedgerStore):
        assert min(reads) > 64  # every leaf of the proof's subtrees
    else:
        assert reads == [[999, 0], [999, 1], [999, 500], [999, 998], [999, 999]] + [[999]] * 6


def test_a_read_only_file_refuses_writes(store: LedgerStore) -> None:
    """Bytes lent by ``reader`` or ``locked(write=False)`` cannot be appended to or cut."""
    _fill(store, 1)
    with store.locked(write=False) as file, pytest.raises(LedgerError):
        file.append(file.size(), b"x")
    with store.reader() as reader:
        assert reader is not None
        with pytest.raises(LedgerError):
            reader.quarantine(0, b"")


def test_a_store_without_an_id_index_lends_none_and_refuses_a_replacement() -> None:
    """The seam's defaults: a store that keeps no id index lends ``None`` (proofs then scan)
    and refuses ``replace_id_index`` with a LedgerError naming the store."""
    store = MemoryLedgerStore()
    with store.id_index(write=True) as index:
        assert index is None
    with pytest.raises(LedgerError, match="keeps no id index"):
        store.replace_id_index(b"")
