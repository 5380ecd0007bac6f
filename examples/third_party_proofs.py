"""Proofs a stranger can check: tiles over HTTP, a witness, an offline bundle (issue 18).

Runs in a few seconds in a temporary folder, all on 127.0.0.1. Look at: the tiles written
(only new ones the second time), an inclusion proof computed by a client that read nothing but
the tiles over HTTP, the witness's cosignature, the one-file bundle that verifies offline
against the log's key and a 1-of-1 witness policy, and the refusals at the end. The witness
part needs the ``ed25519`` extra (``cryptography``) and is skipped without it.
"""

from __future__ import annotations

import functools
import http.server
import sys
import tempfile
import threading
from pathlib import Path

try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from merkle_memory.checkpoint import WitnessPolicy
from merkle_memory.errors import CheckpointError, ProofError
from merkle_memory.ledger import Ledger
from merkle_memory.signed_note import CosignatureSigner, HmacKey
from merkle_memory.tlog import (
    FolderTiles,
    HttpTiles,
    TileClient,
    Witness,
    WitnessServer,
    ledger_bundle,
    publish_tiles,
    verify_ledger_bundle,
    witness_ledger,
)

ORIGIN = "example.com/agents/rocky"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def demo(folder: Path) -> None:
    """Run the walk-through in ``folder``."""
    tenant = folder / "rocky"
    ledger = Ledger(tenant / "ledger.jsonl")
    ledger.append_many((f"mem-{i}", f"{i:064x}") for i in range(300))
    log_key = HmacKey("example.com/agents", bytes(range(32)))  # an example key: never use it

    # 1. Publish the tree as static C2SP tiles, then again after it grew: only new tiles.
    public = folder / "public"
    first = publish_tiles(tenant, public, ORIGIN, [log_key])
    ledger.append_many((f"mem-{i}", f"{i:064x}") for i in range(300, 310))
    second = publish_tiles(tenant, public, ORIGIN, [log_key])
    print(f"tiles: {len(first.written)} files, then {len(second.written)}: {second.written}")

    # 2. Any static file server will do; a client proves from the tiles alone.
    handler = functools.partial(_Quiet, directory=str(public))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = TileClient.open(HttpTiles(f"http://127.0.0.1:{server.server_address[1]}"), [log_key])
    entry = client.entry(41)
    proof = client.verify_leaf(41, entry)
    print(f"entry 41 over HTTP: {entry[:40].decode()}..., proof of {len(proof)} hashes")
    server.shutdown()
    server.server_close()

    # 3. A witness cosigns the checkpoint; the bundle carries the cosignature.
    witness_key = CosignatureSigner("witness.example/w1", bytes(range(64, 96)))  # example key
    try:
        witness_key.verifier()
    except CheckpointError as exc:  # no ed25519 extra: bundles still work, uncosigned
        print(f"witness skipped ({exc})")
        policy = None
    else:
        witness = Witness(folder / "witness.db", witness_key, {ORIGIN: [log_key]})
        with WitnessServer(witness) as running:
            cosigned = witness_ledger(
                tenant, ORIGIN, [log_key], running.url, witness_keys=[witness_key.verifier()]
            )
        print("cosigned checkpoint:\n" + cosigned)
        policy = WitnessPolicy((witness_key.verifier(),), 1)

    # 4. One file proves one memory, offline.
    bundle = ledger_bundle(tenant, "mem-7", ORIGIN, [log_key])
    (folder / "mem-7.tlog-proof").write_text(bundle.to_text())
    checkpoint, proven = verify_ledger_bundle(bundle, [log_key], origin=ORIGIN, policy=policy)
    print(f"bundle: {proven.memory_id} is leaf {bundle.index} of a tree of {checkpoint.size}")

    # 5. Refusals: a bundle for another entry, a tile with one byte changed.
    try:
        verify_ledger_bundle(bundle, [log_key], memory_id="mem-8")
    except ProofError as exc:
        print(f"refused: {exc}")
    tile = public / "tile" / "0" / "000"
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))
    try:
        TileClient.open(FolderTiles(public), [log_key]).leaf_hash(3)
    except ProofError as exc:
        print(f"refused: {type(exc).__name__}: {str(exc)[:60]}...")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        demo(Path(tmp))
