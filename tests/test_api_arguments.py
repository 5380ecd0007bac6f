"""Bad arguments to public entry points raise the library's own errors, never raw ones."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from merkle_memory import canonical, checkpoint, dag, projection, proof, rfc6962, transcripts
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import MAX_MEMORY_FILE_BYTES, Memory
from merkle_memory.dag import store as nodestore
from merkle_memory.errors import (
    BankError,
    CheckpointError,
    ContentBlockError,
    DagError,
    HashLengthError,
    IndexOutOfRangeError,
    LedgerError,
    MemoryFormatError,
    NodeStoreError,
    ProofError,
    ProofLengthError,
    TranscriptFormatError,
)
from merkle_memory.ledger import Holdings, Ledger, seal_if_unsealed, seal_unsealed
from merkle_memory.ledger.proofs import prove_consistency

_TS = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("data", ["abc", 5, None, [1, 2]])
def test_hash_leaf_refuses_non_bytes_like(data: object) -> None:
    """hash_leaf takes bytes-like data only; a str, int (not zero bytes), None or list is a
    ProofError naming the type."""
    with pytest.raises(ProofError) as info:
        rfc6962.hash_leaf(data)  # type: ignore[arg-type]
    assert type(info.value) is ProofError
    assert str(info.value) == (
        f"leaf data must be bytes-like (bytes, bytearray, memoryview), got {type(data).__name__}"
    )


def test_hash_leaf_accepts_every_bytes_like_with_the_same_hash() -> None:
    """bytes, bytearray and memoryview of the same data hash to SHA-256(0x00 || data)."""
    expected = hashlib.sha256(b"\x00abc").digest()
    for data in (b"abc", bytearray(b"abc"), memoryview(b"abc")):
        assert rfc6962.hash_leaf(data) == expected


@pytest.mark.parametrize(("left", "right", "bad"), [("a", b"b", "str"), (b"a", None, "NoneType")])
def test_hash_children_refuses_non_bytes_like(left: object, right: object, bad: str) -> None:
    """hash_children with a str or None child is a HashLengthError naming the bad type."""
    with pytest.raises(HashLengthError) as info:
        rfc6962.hash_children(left, right)  # type: ignore[arg-type]
    assert type(info.value) is HashLengthError
    assert str(info.value) == (
        f"child hash must be bytes-like (bytes, bytearray, memoryview), got {bad}"
    )
    assert rfc6962.hash_children(bytearray(b"a"), memoryview(b"b")) == (
        hashlib.sha256(b"\x01ab").digest()
    )


@pytest.mark.parametrize("bad", ["ab", b"ab" * 16])
def test_verify_inclusion_refuses_a_str_or_bytes_proof(bad: object) -> None:
    """A str/bytes proof is refused whole: the proof must be a sequence of 32-byte hashes."""
    leaves = [rfc6962.hash_leaf(bytes([i])) for i in range(3)]
    root = rfc6962.root(leaves)
    with pytest.raises(ProofLengthError) as info:
        proof.verify_inclusion(leaves[0], 0, 3, bad, root)  # type: ignore[arg-type]
    assert type(info.value) is ProofLengthError
    assert str(info.value) == (
        f"proof must be a sequence of 32-byte hashes, not one {type(bad).__name__} object"
    )
    with pytest.raises(ProofLengthError, match="must be a sequence of 32-byte hashes"):
        proof.verify_consistency(2, 3, bad, root, root)  # type: ignore[arg-type]


def test_prove_consistency_refuses_a_non_int_size(tmp_path: Path) -> None:
    """prove_consistency(ledger, "1") says the size must be an int."""
    led = Ledger(tmp_path / "ledger.jsonl")
    for i in range(2):
        led.append(f"m{i}", canonical.digest(i), ts=1_700_000_000 + i)
    with pytest.raises(IndexOutOfRangeError) as info:
        prove_consistency(led, "1")  # type: ignore[arg-type]
    assert type(info.value) is IndexOutOfRangeError
    assert str(info.value) == "old_size must be an int, not str"


def test_sign_checkpoint_refuses_a_non_checkpoint() -> None:
    """sign_checkpoint(None, []) is a CheckpointError, not an AttributeError."""
    with pytest.raises(CheckpointError) as info:
        checkpoint.sign_checkpoint(None, [])  # type: ignore[arg-type]
    assert type(info.value) is CheckpointError
    assert str(info.value) == "checkpoint must be a Checkpoint, not NoneType"


def test_verify_store_refuses_a_non_store() -> None:
    """verify_store(None) is a NodeStoreError naming the type."""
    with pytest.raises(NodeStoreError) as info:
        nodestore.verify_store(None)  # type: ignore[arg-type]
    assert type(info.value) is NodeStoreError
    assert str(info.value) == "store must be a NodeStore, not NoneType"


@pytest.mark.parametrize("bad", [5, b"store.db", 1.5])
def test_open_store_refuses_a_non_path_and_creates_nothing(
    bad: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_store takes a str, os.PathLike or None; anything else is refused, no file made."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NodeStoreError) as info:
        nodestore.open_store(bad)  # type: ignore[arg-type]
    assert type(info.value) is NodeStoreError
    assert str(info.value) == (
        f"node store path must be a str, an os.PathLike or None, not {type(bad).__name__}"
    )
    assert list(tmp_path.iterdir()) == []


def test_node_hash_refuses_a_non_bucket() -> None:
    """dag.node_hash(None, None) is a DagError naming the type."""
    with pytest.raises(DagError) as info:
        dag.node_hash(None, None)  # type: ignore[arg-type]
    assert type(info.value) is DagError
    assert str(info.value) == "bucket must be a Bucket, not NoneType"


def test_project_content_refuses_a_str_and_non_block_items() -> None:
    """project_content("hello") and a list of str are ContentBlockErrors (model errors)."""
    with pytest.raises(ContentBlockError) as info:
        projection.project_content("hello")  # type: ignore[arg-type]
    assert type(info.value) is ContentBlockError
    assert str(info.value) == "blocks must be a sequence of ContentBlock, not str"
    with pytest.raises(ContentBlockError) as info:
        projection.project_content(["hello"])  # type: ignore[list-item]
    assert str(info.value) == "blocks must hold ContentBlock values, not str"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: projection.strip_tags(None), "strip_tags takes a str, not NoneType"),
        (lambda: projection.strip_tags(b"<a>x</a>"), "strip_tags takes a str, not bytes"),
        (
            lambda: projection.strip_tags("<a>x</a>", "a"),
            "tags must be a sequence of str, not 'a'",
        ),
        (lambda: projection.strip_tags("<a>x</a>", 5), "tags must be a sequence of str, not 5"),
        (
            lambda: projection.strip_tags("<a>x</a>", ["a", ""]),
            "tags must be non-empty str, not ('a', '')",
        ),
        (
            lambda: projection.normalize_whitespace(3),
            "normalize_whitespace takes a str, not int",
        ),
    ],
    ids=["none", "bytes", "str-tags", "int-tags", "empty-tag", "normalize-int"],
)
def test_projection_text_functions_refuse_what_is_not_text(call: object, message: str) -> None:
    """strip_tags and normalize_whitespace refuse a non-str text and tags that are not a
    sequence of non-empty str (a bare str would be one tag per letter) with one
    ContentBlockError, never a raw TypeError."""
    with pytest.raises(ContentBlockError) as info:
        call()  # type: ignore[operator]
    assert type(info.value) is ContentBlockError and str(info.value) == message


def test_strip_tags_takes_any_iterable_of_tags_once() -> None:
    """A list, a tuple and a generator of tags strip the same (a generator is read once)."""
    text = "a<x>1</x>b<y>2</y>c"
    assert projection.strip_tags(text, ["x", "y"]) == "abc"
    assert projection.strip_tags(text, ("y",)) == "a<x>1</x>bc"
    assert projection.strip_tags(text, (t for t in ["x", "y"])) == "abc"


def test_import_file_refuses_a_non_path() -> None:
    """import_file(None) says the path must be a str or os.PathLike."""
    with pytest.raises(TranscriptFormatError) as info:
        transcripts.import_file(None)  # type: ignore[arg-type]
    assert type(info.value) is TranscriptFormatError
    assert str(info.value) == "the transcript path must be a str or os.PathLike, not NoneType"


def test_memory_bank_refuses_a_non_path_root() -> None:
    """MemoryBank(None) is a BankError, not a TypeError."""
    with pytest.raises(BankError) as info:
        MemoryBank(None)  # type: ignore[arg-type]
    assert type(info.value) is BankError
    assert str(info.value) == "bank root must be a str or os.PathLike, not NoneType"


def _memory_of_file_size(size: int) -> Memory:
    """A memory whose file (to_bytes) is exactly ``size`` bytes (content is ASCII)."""
    base = len(Memory("fact", "s", "", timestamp=_TS).to_bytes())
    memory = Memory("fact", "s", "y" * (size - base), timestamp=_TS)
    assert len(memory.to_bytes()) == size
    return memory


def test_save_refuses_a_memory_over_the_file_limit_before_writing(tmp_path: Path) -> None:
    """A memory whose file would be one byte over MAX_MEMORY_FILE_BYTES (16 MiB) is a
    MemoryFormatError naming the limit, and neither the bank folder nor anything in it is
    created."""
    assert MAX_MEMORY_FILE_BYTES == 16 * 1024 * 1024
    root = tmp_path / "bank"
    bank = MemoryBank(root)
    with pytest.raises(MemoryFormatError) as info:
        bank.save(_memory_of_file_size(MAX_MEMORY_FILE_BYTES + 1))
    assert type(info.value) is MemoryFormatError
    assert str(info.value) == (
        f"memory file would be {MAX_MEMORY_FILE_BYTES + 1} bytes, over the limit of "
        f"{MAX_MEMORY_FILE_BYTES} bytes (MAX_MEMORY_FILE_BYTES, 16 MiB)"
    )
    assert not root.exists()
    root.mkdir()
    with pytest.raises(MemoryFormatError):
        bank.save(_memory_of_file_size(MAX_MEMORY_FILE_BYTES + 1))
    assert list(root.iterdir()) == []


@pytest.mark.slow
def test_save_accepts_a_memory_exactly_at_the_file_limit(tmp_path: Path) -> None:
    """A memory whose file is exactly MAX_MEMORY_FILE_BYTES saves and the bank verifies it."""
    bank = MemoryBank(tmp_path / "bank")
    memory = _memory_of_file_size(MAX_MEMORY_FILE_BYTES)
    assert bank.save(memory) == memory.id
    report = bank.verify()
    assert report.ok
    assert bank.locate(memory.id).memory == memory


@pytest.mark.parametrize("not_a_ledger", ["ledger.jsonl", None, 5])
def test_adopt_functions_refuse_what_is_not_a_ledger(not_a_ledger: object) -> None:
    """seal_unsealed and seal_if_unsealed take a Ledger; anything else is a LedgerError naming
    the type (not an AttributeError from deep inside)."""
    with pytest.raises(LedgerError) as info:
        seal_unsealed(not_a_ledger, lambda: Holdings({}, {}), label="x")  # type: ignore[arg-type]
    assert str(info.value) == f"seal_unsealed needs a Ledger, not {type(not_a_ledger).__name__}"
    with pytest.raises(LedgerError) as info:
        seal_if_unsealed(not_a_ledger, "a" * 64, "a" * 64)  # type: ignore[arg-type]
    assert str(info.value) == f"seal_if_unsealed needs a Ledger, not {type(not_a_ledger).__name__}"
