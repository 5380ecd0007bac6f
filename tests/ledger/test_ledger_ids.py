"""The id index ``ledger.ids`` (issue 15 item 3): proof by id in O(log n), trusted for nothing.

The index maps each memory id to the line of its latest entry and is kept by the sidecar's sync.
These tests read its file as docs/FORMAT.md section 7.1 describes it (a reference reader
written here), and check that no wrong, stale or forged index ever gives a proof of anything
but the id's latest entry (checked against a naive scan of the ledger).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merkle_memory import rfc6962
from merkle_memory.errors import LedgerError
from merkle_memory.ledger import Ledger, _idindex, _treesync
from merkle_memory.ledger.proofs import prove_inclusion, sync

H = "ab" * 32
BUCKET = 4096


def _naive_latest(path: Path, memory_id: str) -> dict[str, Any] | None:
    """The last line of the ledger whose entry names ``memory_id`` (a plain scan)."""
    found = None
    for line in path.read_bytes().splitlines():
        entry = json.loads(line)
        if entry["memory_id"] == memory_id:
            found = entry
    return found


def _reference_index(folder: Path) -> dict[bytes, int]:
    """Read ``ledger.ids`` as FORMAT.md 7.1 describes it, checking its digest tree against the
    state's ``ids_root``: key -> line offset."""
    state = json.loads((folder / "ledger.tree.state").read_bytes())
    buckets, data = state["ids_buckets"], (folder / "ledger.ids").read_bytes()
    assert len(data) == buckets * BUCKET + (2 * buckets - 1) * 32
    nodes = [b""] * (2 * buckets)
    for j in range(buckets):
        nodes[buckets + j] = hashlib.sha256(b"\0" + data[j * BUCKET : (j + 1) * BUCKET]).digest()
    for i in range(buckets - 1, 0, -1):
        nodes[i] = hashlib.sha256(b"\1" + nodes[2 * i] + nodes[2 * i + 1]).digest()
    assert b"".join(nodes[1:]) == data[buckets * BUCKET :]
    assert nodes[1].hex() == state["ids_root"]
    out = {}
    for at in range(0, buckets * BUCKET, 16):
        value = int.from_bytes(data[at + 8 : at + 16], "big")
        if value:
            out[data[at : at + 8]] = value - 1
    assert len(out) == state["ids_count"]
    return out


def _fill(folder: Path, ids: list[str]) -> Ledger:
    led = Ledger(folder / "ledger.jsonl")
    led.append_many(
        [(mid, hashlib.sha256(f"{mid}{i}".encode()).hexdigest()) for i, mid in enumerate(ids)]
    )
    return led


def _assert_proofs_match_a_scan(folder: Path, ids: list[str]) -> None:
    path = folder / "ledger.jsonl"
    leaves = [rfc6962.hash_leaf(line) for line in path.read_bytes().splitlines()]
    for mid in ids:
        expected = _naive_latest(path, mid)
        if expected is None:
            with pytest.raises(LedgerError, match="no ledger entry seals"):
                prove_inclusion(folder, mid)
            continue
        proof = prove_inclusion(folder, mid)
        assert proof.entry.to_dict() == expected
        assert (proof.leaf_index, proof.tree_size) == (expected["seq"] - 1, len(leaves))
        proof.verify(rfc6962.root(leaves))


def test_the_index_file_is_the_documented_layout(tmp_path: Path) -> None:
    """After a sync, ``ledger.ids`` read by the reference reader maps the key of every id
    (the first 8 bytes of SHA-256 of its UTF-8 bytes) to the offset of its latest line."""
    ids = ["a", "b", "c", "a", "é✓", "b", 'q"uote', "a"]
    _fill(tmp_path, ids)
    sync(tmp_path)
    index = _reference_index(tmp_path)
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:k]) for k in range(len(lines))]
    latest = {mid: starts[k] for k, mid in enumerate(ids)}
    expected = {hashlib.sha256(m.encode()).digest()[:8]: at for m, at in latest.items()}
    assert index == expected
    state = json.loads((tmp_path / "ledger.tree.state").read_bytes())
    assert (state["ids_buckets"], state["ids_count"]) == (1, 5)


def test_proofs_by_id_match_a_scan_and_the_index_follows_appends(tmp_path: Path) -> None:
    """Proofs by id equal the naive scan's latest entry, before and after more appends (the
    index is updated in place, same buckets), for ids present and absent."""
    ids = [f"m{i % 37}" for i in range(200)]
    led = _fill(tmp_path, ids)
    _assert_proofs_match_a_scan(tmp_path, ["m0", "m36", "m5", "absent"])
    before = json.loads((tmp_path / "ledger.tree.state").read_bytes())
    led.append_many([("m5", "cd" * 32), ("new", H), ("m0", H)])
    _assert_proofs_match_a_scan(tmp_path, ["m0", "m5", "new", "m36", "absent"])
    after = json.loads((tmp_path / "ledger.tree.state").read_bytes())
    assert (before["ids_count"], after["ids_count"]) == (37, 38)
    assert after["ids_buckets"] == before["ids_buckets"]
    assert _reference_index(tmp_path)


def test_the_index_grows_when_half_full(tmp_path: Path) -> None:
    """More distinct ids than half the slots make the index be built anew, twice as large
    (or more); proofs stay right."""
    led = _fill(tmp_path, [f"a{i}" for i in range(10)])
    sync(tmp_path)
    assert json.loads((tmp_path / "ledger.tree.state").read_bytes())["ids_buckets"] == 1
    led.append_many([(f"b{i}", H) for i in range(300)])
    _assert_proofs_match_a_scan(tmp_path, ["a0", "a9", "b0", "b299"])
    state = json.loads((tmp_path / "ledger.tree.state").read_bytes())
    assert (state["ids_buckets"], state["ids_count"]) == (4, 310)
    assert len(_reference_index(tmp_path)) == 310


def _older_offset(folder: Path, memory_id: str) -> int:
    """The offset of the first (not the latest) line of ``memory_id``."""
    at = 0
    for line in (folder / "ledger.jsonl").read_bytes().splitlines(keepends=True):
        if json.loads(line)["memory_id"] == memory_id:
            return at
        at += len(line)
    raise AssertionError(memory_id)


def _set_value(folder: Path, memory_id: str, offset: int, *, retree: bool, restate: bool) -> None:
    """Point the slot of ``memory_id`` at ``offset``; with ``retree`` recompute the digest
    tree, with ``restate`` also write its root into the state (a consistent forgery)."""
    state_path = folder / "ledger.tree.state"
    state = json.loads(state_path.read_bytes())
    buckets = state["ids_buckets"]
    data = bytearray((folder / "ledger.ids").read_bytes())
    key = hashlib.sha256(memory_id.encode()).digest()[:8]
    at = data.index(key)
    assert at % 16 == 0
    data[at + 8 : at + 16] = (offset + 1).to_bytes(8, "big")
    if retree:
        nodes = [b""] * (2 * buckets)
        for j in range(buckets):
            nodes[buckets + j] = hashlib.sha256(
                b"\0" + bytes(data[j * BUCKET : (j + 1) * BUCKET])
            ).digest()
        for i in range(buckets - 1, 0, -1):
            nodes[i] = hashlib.sha256(b"\1" + nodes[2 * i] + nodes[2 * i + 1]).digest()
        data[buckets * BUCKET :] = b"".join(nodes[1:])
        if restate:
            state["ids_root"] = nodes[1].hex()
            state_path.write_text(json.dumps(state))
    (folder / "ledger.ids").write_bytes(bytes(data))


FORGERIES = {
    "older-entry-of-the-id": lambda f: _set_value(
        f, "m3", _older_offset(f, "m3"), retree=False, restate=False
    ),
    "older-entry-tree-recomputed": lambda f: _set_value(
        f, "m3", _older_offset(f, "m3"), retree=True, restate=False
    ),
    "another-ids-entry-and-state": lambda f: _set_value(
        f, "m3", _older_offset(f, "m4"), retree=True, restate=True
    ),
    "mid-line-offset-and-state": lambda f: _set_value(f, "m3", 17, retree=True, restate=True),
    "past-the-end-and-state": lambda f: _set_value(f, "m3", 10**9, retree=True, restate=True),
    "zeroed": lambda f: (f / "ledger.ids").write_bytes(bytes(len((f / "ledger.ids").read_bytes()))),
    "removed": lambda f: (f / "ledger.ids").unlink(),
    "truncated": lambda f: (f / "ledger.ids").write_bytes((f / "ledger.ids").read_bytes()[:100]),
    "garbage": lambda f: (f / "ledger.ids").write_bytes(
        os.urandom(len((f / "ledger.ids").read_bytes()))
    ),
    "state-root-wrong": lambda f: (f / "ledger.tree.state").write_text(
        json.dumps(json.loads((f / "ledger.tree.state").read_bytes()) | {"ids_root": "0" * 64})
    ),
    "state-without-index": lambda f: (f / "ledger.tree.state").write_text(
        json.dumps(
            {
                k: v
                for k, v in json.loads((f / "ledger.tree.state").read_bytes()).items()
                if not k.startswith("ids_")
            }
        )
    ),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_wrong_index_never_gives_a_wrong_proof(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever is wrong with the index (a slot pointing at an older entry of the id, even
    with its digest tree recomputed; at another id's entry, mid-line or past the end, even
    with the state's root rewritten to match; zeroed, removed, truncated, garbage; a wrong
    or missing root in the state), every proof by id is the scan's latest entry, and the
    index is the ledger's again afterwards."""
    ids = [f"m{i % 6}" for i in range(30)]
    _fill(tmp_path, ids)
    sync(tmp_path)
    good = (tmp_path / "ledger.ids").read_bytes()
    FORGERIES[name](tmp_path)
    with caplog.at_level(logging.WARNING, logger="merkle_memory.ledger"):
        _assert_proofs_match_a_scan(tmp_path, ["m3", "m4", "m0", "absent"])
    assert (tmp_path / "ledger.ids").read_bytes() == good
    assert _reference_index(tmp_path)


def test_a_stale_index_from_an_earlier_sync_is_not_trusted(tmp_path: Path) -> None:
    """An older copy of ``ledger.ids`` (from before more appends) put back after a sync:
    it does not match the recorded root, so proofs are the scan's and the index is rebuilt."""
    led = _fill(tmp_path, [f"m{i % 5}" for i in range(20)])
    sync(tmp_path)
    shutil.copy(tmp_path / "ledger.ids", tmp_path / "old.ids")
    led.append_many([("m1", "cd" * 32), ("m2", "cd" * 32)])
    sync(tmp_path)
    shutil.copy(tmp_path / "old.ids", tmp_path / "ledger.ids")
    _assert_proofs_match_a_scan(tmp_path, ["m1", "m2", "m3"])
    assert _reference_index(tmp_path)


def test_a_consistent_forgery_of_index_and_state_names_only_an_entry_of_the_id(
    tmp_path: Path,
) -> None:
    """The documented limit (docs/THREAT_MODEL.md): someone who rewrites the index and the
    state's root together can make a proof name an older entry of the same id, which is in
    the tree; never an entry of another id (see the forgeries above). ``ledger verify``
    still judges every record by its latest entry."""
    _fill(tmp_path, [f"m{i % 6}" for i in range(30)])
    sync(tmp_path)
    _set_value(tmp_path, "m3", _older_offset(tmp_path, "m3"), retree=True, restate=True)
    proof = prove_inclusion(tmp_path, "m3")
    assert (proof.entry.memory_id, proof.entry.seq) == ("m3", 4)
    leaves = [rfc6962.hash_leaf(x) for x in (tmp_path / "ledger.jsonl").read_bytes().splitlines()]
    proof.verify(rfc6962.root(leaves))


def test_ids_sharing_a_key_are_proven_by_reading_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ids whose 64-bit keys are equal (forced here: every key is the id's length) share a
    slot; the proof of the id the slot does not name falls back to reading the ledger and
    is still the scan's latest entry."""

    def short_key(memory_id: str | bytes) -> bytes:
        data = memory_id.encode() if isinstance(memory_id, str) else memory_id
        return len(data).to_bytes(8, "big")

    monkeypatch.setattr(_idindex, "id_key", short_key)
    monkeypatch.setattr(_treesync, "id_key", short_key)
    _fill(tmp_path, ["ab", "cd", "ab", "xyz", "cd", "ef"])
    _assert_proofs_match_a_scan(tmp_path, ["ab", "cd", "ef", "xyz", "zz", "abc"])


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5)),
        st.tuples(st.just("prove"), st.sampled_from("abcdefgh")),
        st.tuples(st.just("flip"), st.integers(0, 10**6)),
        st.tuples(st.just("sync"), st.none()),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_proof_by_id_equals_a_naive_scan_whatever_happens(
    tmp_path_factory: Any, ops: list[Any]
) -> None:
    """Property: any sequence of appends, syncs, proofs and single-byte flips anywhere in
    ``ledger.ids``: every proof by id is exactly the scan's latest entry of that id (or
    "no entry" exactly when the scan finds none)."""
    folder = tmp_path_factory.mktemp("ids")
    led = Ledger(folder / "ledger.jsonl")
    n = 0
    for op, arg in ops:
        if op == "append":
            led.append_many(
                [
                    (mid, hashlib.sha256(f"{mid}{n + k}".encode()).hexdigest())
                    for k, mid in enumerate(arg)
                ]
            )
            n += len(arg)
        elif op == "sync" and n:
            sync(folder)
        elif op == "flip" and (folder / "ledger.ids").exists():
            data = bytearray((folder / "ledger.ids").read_bytes())
            data[arg % len(data)] ^= 0x01
            (folder / "ledger.ids").write_bytes(bytes(data))
        elif op == "prove" and n:
            _assert_proofs_match_a_scan(folder, [arg])
    if n:
        _assert_proofs_match_a_scan(folder, list("abcdefgh"))
