"""Ed25519 stays optional: without ``cryptography`` everything imports and the HMAC path works."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support import REPO

_SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys, tempfile
    sys.modules["cryptography"] = None  # any import of cryptography now fails
    import merkle_memory
    import merkle_memory.cli
    for info in pkgutil.walk_packages(merkle_memory.__path__, "merkle_memory."):
        importlib.import_module(info.name)
    loaded = [name for name, module in sys.modules.items() if module is not None]
    assert not any(name.split(".")[0] == "cryptography" for name in loaded)

    from merkle_memory import rfc6962
    from merkle_memory.checkpoint import Checkpoint, sign_checkpoint
    from merkle_memory.errors import CheckpointError
    from merkle_memory.signed_note import CosignatureSigner, HmacKey, generate_ed25519_key
    from merkle_memory.tlog import FolderTiles, ProofBundle, TileClient, Witness, write_tiles
    from merkle_memory.proof import inclusion_proof

    key = HmacKey("log.example", bytes(32))
    leaves = [rfc6962.hash_leaf(b"%d" % i) for i in range(300)]
    note = sign_checkpoint(Checkpoint("log.example", 300, rfc6962.root(leaves)), [key])
    folder = tempfile.mkdtemp()
    write_tiles(folder, note, leaves)
    client = TileClient.open(FolderTiles(folder), [key])
    client.inclusion_proof(299)
    bundle = ProofBundle(7, tuple(inclusion_proof(7, 300, leaves)), note)
    bundle.verify([key], leaf_hash=leaves[7])
    import json
    from merkle_memory.signed_note import open_note, verifier_from_key
    go = json.load(open("tests/assets/tlog_upstream/golang_mod_note.json"))
    peter = verifier_from_key(go["peter_vkey"])  # verifying needs no extra: pure Python
    assert open_note(go["signed_by_peter"], [peter]).verified_by == ("PeterNeumann",)
    kat = json.load(open("tests/assets/tlog_upstream/derived_cosignature.json"))
    witness = verifier_from_key(kat["verifier_key"])
    cosigned = kat["checkpoint_text"] + "\\n" + kat["cosignature_line"] + "\\n"
    assert open_note(cosigned, [witness]).verified_by == (kat["witness_name"],)
    try:
        open_note(cosigned.replace("20852163", "20852164"), [witness])
    except CheckpointError:
        pass
    else:
        raise AssertionError("a changed checkpoint verified")
    for make in (
        lambda: generate_ed25519_key("x"),
        lambda: Witness(folder + "/w.db", CosignatureSigner("w", bytes(32)), {"log.ex": [key]}),
    ):
        try:
            make()
        except CheckpointError as exc:
            assert "pip install 'merkle_memory[ed25519]'" in str(exc)
        else:
            raise AssertionError("Ed25519 worked without cryptography")
    print("ok")
    """
)


def test_the_core_imports_and_works_without_cryptography() -> None:
    """With `cryptography` blocked, every module (tlog and the CLI included) imports, HMAC
    checkpoints, tiles, the tiles client and bundles work, Ed25519 signatures and cosignatures
    (the golang/mod note, the pinned cosignature) verify in pure Python, and making an Ed25519
    key or a witness fails with the message naming the `ed25519` extra."""
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "ok\n", "")
