"""Bad arguments to the tlog API are the library's errors with clear messages, never a raw
TypeError or AttributeError (trial of issue 18)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from merkle_memory.errors import CheckpointError, MerkleMemoryError, ProofError, WitnessError
from merkle_memory.ledger import Ledger
from merkle_memory.signed_note import (
    CosignatureSigner,
    CosignatureVerifier,
    Ed25519Verifier,
    HmacKey,
    log_signer_from_key,
    log_verifier_from_key,
    open_note,
)
from merkle_memory.tlog import (
    FolderTiles,
    TileClient,
    Witness,
    WitnessClient,
    WitnessServer,
    publish_tiles,
    verify_ledger_bundle,
)

ORIGIN = "example.com/agents/cc"
KEY = HmacKey("example.com/agents", bytes(range(32)))
WITNESS = CosignatureSigner("witness.example/w1", bytes(range(64, 96)))
WITNESS_KEY = CosignatureVerifier("witness.example/w1", bytes(32))
_WITNESS_NOT_LOG = (
    "key 'witness.example/w1' is a witness's cosigner key (type 0x04), not a log's key"
)


@pytest.fixture
def tenant(tmp_path: Path) -> Path:
    """A tenant of 3 entries, published as tiles under tmp_path/public."""
    folder = tmp_path / "cc"
    folder.mkdir()
    Ledger(folder / "ledger.jsonl").append_many(
        [(f"note-{i}", f"{i:064x}") for i in range(3)], ts=1_700_000_000.0
    )
    publish_tiles(folder, tmp_path / "public", ORIGIN, [KEY])
    return folder


CASES: list[tuple[str, Callable[[Path], Any], type[MerkleMemoryError], str]] = [
    (
        "TileClient.open(fetcher, None)",
        lambda t: TileClient.open(FolderTiles(t.parent / "public"), None),  # type: ignore[arg-type]
        CheckpointError,
        "the log's keys are a sequence of verifiers, not NoneType",
    ),
    (
        "TileClient.open(fetcher, [witness key])",
        lambda t: TileClient.open(FolderTiles(t.parent / "public"), [WITNESS_KEY]),
        CheckpointError,
        _WITNESS_NOT_LOG + " (witness keys go in a WitnessPolicy)",
    ),
    (
        "publish_tiles(..., 'abc')",
        lambda t: publish_tiles(t, t.parent / "out", ORIGIN, "abc"),  # type: ignore[arg-type]
        CheckpointError,
        "signers are a sequence of signer keys, not str "
        "(signed_note.signer_from_key makes one from a key string)",
    ),
    (
        "publish_tiles(..., [verifier])",
        lambda t: publish_tiles(
            t,
            t.parent / "out",
            ORIGIN,
            [Ed25519Verifier("example.com/agents", bytes(32))],  # type: ignore[list-item]
        ),
        CheckpointError,
        "Ed25519Verifier is not a signer key (it has no name, key_id and sign; "
        "signed_note.signer_from_key makes one from a key string)",
    ),
    (
        "publish_tiles(..., [cosigner])",
        lambda t: publish_tiles(t, t.parent / "out", ORIGIN, [WITNESS]),
        CheckpointError,
        _WITNESS_NOT_LOG + ": it cannot sign a checkpoint",
    ),
    (
        "Witness(db, key, ['a'])",
        lambda t: Witness(t.parent / "w.db", WITNESS, ["a"]),  # type: ignore[arg-type]
        WitnessError,
        "a witness's logs map each origin to its verifier keys, not list",
    ),
    (
        "Witness(db, key, {origin: 'a'})",
        lambda t: Witness(t.parent / "w.db", WITNESS, {ORIGIN: "a"}),  # type: ignore[dict-item]
        WitnessError,
        f"log {ORIGIN!r} needs a non-empty sequence of verifier keys",
    ),
    (
        "Witness(db, key, {origin: ['a']})",
        lambda t: Witness(t.parent / "w.db", WITNESS, {ORIGIN: ["a"]}),  # type: ignore[list-item]
        WitnessError,
        f"log {ORIGIN!r}: str is not a verifier key (signed_note.verifier_from_key makes one)",
    ),
    (
        "Witness(db, key, {origin: [witness key]})",
        lambda t: Witness(t.parent / "w.db", WITNESS, {ORIGIN: [WITNESS_KEY]}),
        WitnessError,
        f"log {ORIGIN!r}: key 'witness.example/w1' is a witness's cosignature key (type 0x04), "
        "not a log's key",
    ),
    (
        "Witness(db, hmac key, logs)",
        lambda t: Witness(t.parent / "w.db", KEY, {ORIGIN: [KEY]}),  # type: ignore[arg-type]
        WitnessError,
        "a witness signs with a CosignatureSigner (type 0x04), not HmacKey",
    ),
    (
        "verify_ledger_bundle('garbage', ...)",
        lambda t: verify_ledger_bundle("garbage", [KEY]),
        ProofError,
        "proof bundle has no empty line before its checkpoint",
    ),
    (
        "verify_ledger_bundle(None, ...)",
        lambda t: verify_ledger_bundle(None, [KEY]),  # type: ignore[arg-type]
        ProofError,
        "bundle must be a ProofBundle or its text, not NoneType",
    ),
    (
        "open_note(note, 5)",
        lambda t: open_note("x\n\n\u2014 k AAAAAAA=\n", 5),  # type: ignore[arg-type]
        CheckpointError,
        "verifiers are a sequence of verifier keys, not int "
        "(signed_note.verifier_from_key makes one from a key string)",
    ),
    (
        "open_checkpoint(note, [witness key])",
        lambda t: open_checkpoint((t.parent / "public" / "checkpoint").read_text(), [WITNESS_KEY]),
        CheckpointError,
        _WITNESS_NOT_LOG + " (witness keys go in a WitnessPolicy)",
    ),
    (
        "sign_checkpoint(checkpoint, [cosigner])",
        lambda t: sign_checkpoint(Checkpoint(ORIGIN, 0, rfc6962.EMPTY_ROOT), [WITNESS]),
        CheckpointError,
        _WITNESS_NOT_LOG + ": it cannot sign a checkpoint",
    ),
    (
        "log_signer_from_key(cosigner key)",
        lambda t: log_signer_from_key(WITNESS.skey()),
        CheckpointError,
        _WITNESS_NOT_LOG,
    ),
    (
        "log_verifier_from_key(cosigner verifier key)",
        lambda t: log_verifier_from_key(WITNESS_KEY.vkey()),
        CheckpointError,
        _WITNESS_NOT_LOG,
    ),
    (
        "WitnessServer(witness, port=99999)",
        lambda t: WitnessServer(None, port=99999),  # type: ignore[arg-type]
        WitnessError,
        "port 99999 is not in 0..65535",
    ),
    (
        "WitnessClient(url, timeout=nan)",
        lambda t: WitnessClient("http://127.0.0.1:9", timeout=float("nan")),
        WitnessError,
        "timeout nan is not a number of seconds in (0, 86400.0]",
    ),
    (
        "WitnessClient(url, timeout=-1)",
        lambda t: WitnessClient("http://127.0.0.1:9", timeout=-1),
        WitnessError,
        "timeout -1 is not a number of seconds in (0, 86400.0]",
    ),
    (
        "WitnessClient(None)",
        lambda t: WitnessClient(None),  # type: ignore[arg-type]
        WitnessError,
        "a witness URL is a string, not NoneType",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_arguments_raise_the_library_errors(
    tenant: Path, call: Callable[[Path], Any], error: type[MerkleMemoryError], message: str
) -> None:
    """Each bad argument raises the documented MerkleMemoryError subclass with its message,
    and writes nothing (no tiles folder, no witness database)."""
    with pytest.raises(error) as caught:
        call(tenant)
    assert str(caught.value) == message
    assert not (tenant.parent / "out").exists() and not (tenant.parent / "w.db").exists()


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), True, "10", None])
def test_s3_tiles_refuses_a_timeout_that_is_not_seconds(timeout: Any) -> None:
    """S3Tiles(timeout=...) takes a finite number of seconds > 0, else a TileError that
    quotes the value (before boto3 is needed)."""
    from merkle_memory.errors import TileError
    from merkle_memory.tlog import S3Tiles

    with pytest.raises(TileError) as caught:
        S3Tiles("s3://logs/cc", timeout=timeout)
    assert str(caught.value) == f"an S3 timeout is a number of seconds > 0, not {timeout!r}"
