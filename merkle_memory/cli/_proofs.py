"""``merkle-memory ledger prove|consistency|checkpoint|verify-proof|keygen`` (DESIGN §7).

TENANT is a tenant directory holding ``ledger.jsonl``; the Merkle sidecar ``ledger.tree``
(with ``ledger.tree.state`` and the id index ``ledger.ids``) beside it is created or caught up
on each call. TENANT may also be a ``postgresql://...#tenant`` URL (the sidecar is then kept
in the database).

Key files are text, one key string per line (blank lines and ``#`` comments ignored):
signer keys ``PRIVATE+KEY+<name>+<id>+<base64>`` for ``checkpoint --key``, verifier keys
``<name>+<id>+<base64>`` (or, for HMAC, the signer key itself) for ``verify-proof --key``.
``keygen`` writes a signer key file (mode 0600) and prints the verifier key: Ed25519's public
key (a witness's ``cosignature/v1`` key with ``--type cosigner``), or for HMAC the secret key
itself (the only form it has; a warning says so).

``prove --bundle`` and ``verify-proof --bundle`` (offline c2sp.org/tlog-proof bundles) and the
witness options ``--witness``/``--quorum`` are implemented in ``_tlog``.

JSON documents (``--json``, one document on stdout):

- ``prove``: ``{memory_id, leaf_index (0-based), tree_size, leaf_hash, root_hash,
  inclusion_proof: [hex]}`` (DESIGN section 7) plus ``entry``, the proven entry object
  (its RFC 8785 form is the leaf data, see ``ledger.proofs``);
- ``consistency``: ``{old_size, new_size, old_root, new_root, consistency_proof: [hex]}``;
- ``checkpoint``: ``{origin, tree_size, root_hash, note}`` (``note``: the signed note text).

Without ``--json`` ``prove`` and ``consistency`` print ``key: value`` lines (a list as
indented lines, ``entry`` as its canonical line). Warnings (no ``--key``, an HMAC key) go to
stderr and are silenced by ``-q``.

Proving needs no write access: the ledger lock is taken read-only, and when the sidecar
cannot be written the proof is computed in memory from the ledger (O(n)), writing nothing.

``verify-proof`` checks the document's ``entry`` against ``leaf_hash``, ``memory_id`` and
``leaf_index`` before the proof itself. A bare ``--root`` does not authenticate a tree size,
so the result line then says the size is the proof's claim; ``--size N`` (with ``--root``)
or ``--checkpoint`` pins it.
"""

from __future__ import annotations

import argparse
import hmac
import json
import sys
from pathlib import Path
from typing import Any

from .. import canonical
from .._fsio import atomic_write
from .._pg import is_url
from ..checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ..errors import CheckpointError, LedgerError, ProofError, RootMismatchError
from ..ledger import PostgresLedgerStore
from ..ledger.proofs import (
    ConsistencyProof,
    InclusionProof,
    prove_consistency,
    prove_inclusion,
    tree_head,
)
from ..signed_note import (
    generate_cosigner_key,
    generate_ed25519_key,
    generate_hmac_key,
    log_signer_from_key,
    log_verifier_from_key,
)
from . import _tlog
from ._output import Progress, keys_from, must_exist, note, positive_int, print_json

__all__ = ["register"]

_TENANT_HELP = "tenant directory holding ledger.jsonl, or postgresql://...#tenant"


_PROVE_EPILOG = """\
examples:
  merkle-memory ledger prove agents/cc --memory-id note-1
  merkle-memory ledger prove agents/cc --memory-id note-1 --bundle note-1.tlog-proof \\
      --origin example.com/agents/cc --key signer.key
  merkle-memory ledger prove 'postgresql:///agents?host=/run/pg#cc' --memory-id note-1 \\
      --bundle note-1.tlog-proof --origin example.com/agents/cc --key signer.key"""

_CONSISTENCY_EPILOG = """\
examples:
  merkle-memory ledger consistency agents/cc --old-size 3
  merkle-memory ledger consistency agents/cc --old-size 3 --json > consistency.json"""

_CHECKPOINT_EPILOG = """\
examples:
  merkle-memory ledger checkpoint agents/cc --origin example.com/agents/cc --key signer.key
  merkle-memory ledger checkpoint agents/cc --origin example.com/agents/cc --json"""

_VERIFY_PROOF_EPILOG = """\
examples:
  merkle-memory ledger verify-proof proof.json --root "$TRUSTED_ROOT" --size 11
  merkle-memory ledger verify-proof proof.json --checkpoint cc.note --key verifier.key
  merkle-memory ledger verify-proof --bundle note-1.tlog-proof --key verifier.key \\
      --witness w1.vkey --witness w2.vkey --quorum 1 --memory-id note-1"""

_KEYGEN_EPILOG = """\
examples:
  merkle-memory ledger keygen --name example.com/agents --out signer.key > verifier.key
  merkle-memory ledger keygen --name example.com/agents --type hmac --out shared.key
  merkle-memory ledger keygen --name witness.example/w1 --type cosigner --out w1.key > w1.vkey"""


def register(subparsers: Any) -> None:
    """Add ``prove``, ``consistency``, ``checkpoint``, ``verify-proof`` and ``keygen``."""
    p = subparsers.add_parser(
        "prove",
        help="inclusion proof of a memory's latest entry",
        description="Print the RFC 6962 inclusion proof of the latest trusted ledger entry of "
        "a memory id in the tenant's Merkle tree (leaf index 0-based, hashes 64-char hex). "
        "With --bundle, write instead an offline proof bundle (c2sp.org/tlog-proof@v1: the "
        "index, the proof, the entry line as extra data and the signed checkpoint, the "
        "cosigned one of TENANT/ledger.cosigned, or of a database tenant's row of that name, "
        "when it covers the entry). "
        "Exit 1 for an unknown id or a broken chain.",
        epilog=_PROVE_EPILOG,
    )
    p.add_argument("tenant", metavar="TENANT", help=_TENANT_HELP)
    p.add_argument("--memory-id", required=True, metavar="ID", help="the record id")
    p.add_argument(
        "--bundle", metavar="FILE", help="write a .tlog-proof bundle to FILE ('-': stdout)"
    )
    p.add_argument("--origin", metavar="NAME", help="with --bundle: the log's origin line")
    p.add_argument("--key", metavar="FILE", help="with --bundle: the log's signer key file")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_prove, proofs_parser=p)

    p = subparsers.add_parser(
        "consistency",
        help="consistency proof from an older size",
        description="Print the RFC 6962 consistency proof that the tenant's tree today "
        "extends the tree of an older size (1 <= N <= today's size).",
        epilog=_CONSISTENCY_EPILOG,
    )
    p.add_argument("tenant", metavar="TENANT", help=_TENANT_HELP)
    p.add_argument(
        "--old-size",
        required=True,
        type=positive_int,
        metavar="N",
        help="the older tree size (>= 1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_consistency)

    p = subparsers.add_parser(
        "checkpoint",
        help="print the signed checkpoint of a ledger",
        description="Print the tenant's tree head as a C2SP signed note (origin, tree size, "
        "base64 root hash, signature lines); without --key the unsigned body.",
        epilog=_CHECKPOINT_EPILOG,
    )
    p.add_argument("tenant", metavar="TENANT", help=_TENANT_HELP)
    p.add_argument("--origin", required=True, metavar="NAME", help="the log's origin line")
    p.add_argument("--key", metavar="FILE", help="signer key file (without: the unsigned body)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_checkpoint)

    p = subparsers.add_parser(
        "verify-proof",
        help="verify a proof printed by prove/consistency",
        description="Check an inclusion or consistency proof document (printed by prove "
        "--json or consistency --json) against a trusted root hash, or against a signed "
        "checkpoint whose signature is checked with the verifier key. An inclusion proof's "
        "entry must match its leaf hash, memory id and leaf index. A root alone does not "
        "authenticate a tree size: with --root the size is the proof's claim unless --size "
        "pins it (a checkpoint always does). With --bundle, check a .tlog-proof bundle "
        "offline instead: the checkpoint's signature (and witness quorum), the proof, and "
        "that its entry is the one at its index. Exit 1 if it does not verify.",
        epilog=_VERIFY_PROOF_EPILOG,
    )
    p.add_argument(
        "proof",
        nargs="?",
        metavar="PROOF.json",
        help="the JSON printed with --json ('-': stdin); not with --bundle",
    )
    trust = p.add_mutually_exclusive_group()
    trust.add_argument("--root", metavar="HEX", help="trusted root, 64-char hex")
    trust.add_argument("--checkpoint", metavar="FILE", help="trusted signed checkpoint file")
    trust.add_argument("--bundle", metavar="FILE", help="a .tlog-proof bundle ('-': stdin)")
    p.add_argument(
        "--key",
        metavar="FILE",
        help="verifier key file (required with --checkpoint and --bundle)",
    )
    p.add_argument("--origin", metavar="NAME", help="with --bundle: the origin it must have")
    p.add_argument(
        "--memory-id", metavar="ID", help="with --bundle: the memory id the entry must seal"
    )
    p.add_argument("--json", action="store_true", help="with --bundle: one JSON document")
    _tlog.add_policy_arguments(p)
    p.add_argument(
        "--size",
        type=int,
        metavar="N",
        help="with --root: the trusted tree size of that root (the proof's size must match; "
        "for a consistency proof either size)",
    )
    p.set_defaults(func=_verify_proof, proofs_parser=p)

    p = subparsers.add_parser(
        "keygen",
        help="create a checkpoint signing key",
        description="Write a new signer key to --out (mode 0600, refusing to overwrite) and "
        "print the matching verifier key on stdout. Ed25519 (the default) needs the ed25519 "
        "extra; its verifier key is public. An HMAC key has no public half: its verifier key "
        "is the secret key itself (the same line as in --out), so whoever can verify can also "
        "sign, and what is printed must be kept as secret as the key file.",
        epilog=_KEYGEN_EPILOG,
    )
    p.add_argument(
        "--name", required=True, metavar="NAME", help="key name, e.g. example.com/agents"
    )
    p.add_argument(
        "--type",
        choices=("ed25519", "hmac", "cosigner"),
        default="ed25519",
        help="default: ed25519; cosigner: a witness key (cosignature/v1, type 0x04)",
    )
    p.add_argument(
        "--out", required=True, metavar="FILE", help="signer key file to create (mode 0600)"
    )
    p.set_defaults(func=_keygen)


def _ledger(tenant: str) -> Path | PostgresLedgerStore:
    if is_url(tenant):
        return PostgresLedgerStore.existing(tenant)
    must_exist(tenant)
    folder = Path(tenant)
    if not folder.is_dir():
        raise LedgerError(f"{tenant}: not a tenant directory")
    path = folder / "ledger.jsonl"
    if not path.is_file():
        raise LedgerError(f"{tenant}: no ledger.jsonl")
    return path


def _emit(document: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(document)
        return
    for key, value in document.items():
        if isinstance(value, dict):
            print(f"{key}: {canonical.dumps(value).decode()}")
        elif isinstance(value, list):
            print(f"{key}:")
            for item in value:
                print(f"  {item}")
        else:
            print(f"{key}: {value}")


def _prove(args: argparse.Namespace) -> int:
    if args.bundle is not None:
        return _tlog.prove_bundle(args)
    if args.origin is not None or args.key is not None:
        note(args, "warning: --origin and --key are only used with --bundle")
    path = _ledger(args.tenant)
    with Progress.for_args(args, "ledger prove") as progress:
        result = prove_inclusion(path, args.memory_id, progress=progress.reporter())
    _emit(result.to_dict(), args.json)
    return 0


def _consistency(args: argparse.Namespace) -> int:
    path = _ledger(args.tenant)
    with Progress.for_args(args, "ledger consistency") as progress:
        result = prove_consistency(path, args.old_size, progress=progress.reporter())
    _emit(result.to_dict(), args.json)
    return 0


def _checkpoint(args: argparse.Namespace) -> int:
    path = _ledger(args.tenant)
    with Progress.for_args(args, "ledger checkpoint") as progress:
        checkpoint = tree_head(path, args.origin, progress=progress.reporter())
    if args.key:
        signers = keys_from(args.key, log_signer_from_key)
        text = sign_checkpoint(checkpoint, signers)
    else:
        text = checkpoint.to_text()
        note(args, "warning: no --key, printing the unsigned checkpoint body")
    if args.json:
        document = {
            "origin": checkpoint.origin,
            "tree_size": checkpoint.size,
            "root_hash": checkpoint.root.hex(),
            "note": text,
        }
        print_json(document)
    else:
        sys.stdout.write(text)
    return 0


def _load_proof(path: str) -> InclusionProof | ConsistencyProof:
    raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProofError(f"{path}: not JSON") from exc
    if isinstance(document, dict) and "inclusion_proof" in document:
        return InclusionProof.from_dict(document)
    if isinstance(document, dict) and "consistency_proof" in document:
        return ConsistencyProof.from_dict(document)
    raise ProofError(f"{path}: neither an inclusion nor a consistency proof document")


def _usage_error(args: argparse.Namespace, message: str) -> int:
    """Print argparse's usage and ``message`` on stderr; return its exit code (2)."""
    parser: argparse.ArgumentParser = args.proofs_parser
    try:
        parser.error(message)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return 2  # pragma: no cover - parser.error always exits


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flag combination of ``verify-proof``, or ``None``."""
    if args.quorum and not args.witness:
        return "--quorum needs --witness keys"
    if args.bundle is not None:
        if args.proof is not None:
            return "--bundle takes no PROOF.json"
        if not args.key:
            return "--bundle needs --key (the log's verifier key file)"
        return None
    if args.proof is None:
        return "give PROOF.json, or --bundle FILE"
    if args.root is None and args.checkpoint is None:
        return "one of --root, --checkpoint or --bundle is required"
    if args.origin is not None or args.memory_id is not None or args.json:
        return "--origin, --memory-id and --json go with --bundle"
    if (args.witness or args.quorum is not None) and args.checkpoint is None:
        return "--witness and --quorum go with --checkpoint or --bundle"
    if args.checkpoint is not None and not args.key:
        return "--checkpoint needs --key (the log's verifier key file)"
    if args.root is not None and args.key:
        return "--key goes with --checkpoint, not with --root"
    if args.checkpoint is not None and args.size is not None:
        return "--size goes with --root (a checkpoint carries its own size)"
    if args.size is not None and args.size < 0:
        return "--size must be >= 0"
    return None


def _trusted_root(args: argparse.Namespace, sizes: tuple[int, ...]) -> tuple[int | None, bytes]:
    """Return (trusted size or ``None`` when not pinned, root) of the trusted tree head."""
    if args.root is not None:
        text = args.root.strip().lower()
        if len(text) != 64:
            raise ProofError("--root must be a 64-char hex hash")
        try:
            root = bytes.fromhex(text)
        except ValueError as exc:
            raise ProofError("--root must be a 64-char hex hash") from exc
        if args.size is not None and args.size not in sizes:
            raise ProofError(
                f"--size {args.size} does not match the proof's tree size "
                + " / ".join(str(s) for s in sizes)
            )
        return args.size, root
    verifiers = keys_from(args.key, log_verifier_from_key)
    checkpoint: Checkpoint = open_checkpoint(
        Path(args.checkpoint).read_bytes(), verifiers, policy=_tlog.policy(args)
    )
    if checkpoint.size not in sizes:
        raise ProofError(
            f"the checkpoint is for tree size {checkpoint.size}, the proof for "
            + " / ".join(str(s) for s in sizes)
        )
    return checkpoint.size, checkpoint.root


_UNPINNED = "as claimed by the proof; pin it with --size or --checkpoint"


def _verify_proof(args: argparse.Namespace) -> int:
    problem = _usage_problem(args)
    if problem is not None:
        return _usage_error(args, problem)
    if args.bundle is not None:
        return _tlog.verify_bundle(args)
    proof = _load_proof(args.proof)
    if isinstance(proof, InclusionProof):
        size, root = _trusted_root(args, (proof.tree_size,))
        proof.verify(root)
        what = f"leaf {proof.leaf_index} (seq {proof.entry.seq} of memory id {proof.memory_id!r})"
        if size is None:
            where = f"the tree with root {root.hex()} (size {proof.tree_size} {_UNPINNED})"
        else:
            where = f"the tree of size {size} with root {root.hex()}"
        print(f"verified: {what} is in {where}")
        return 0
    pinned, root = _trusted_root(args, (proof.new_size, proof.old_size))
    size = proof.new_size if pinned is None else pinned
    claimed = proof.new_root if size == proof.new_size else proof.old_root
    if not hmac.compare_digest(claimed, root):
        raise RootMismatchError(expected=root, calculated=claimed)
    proof.verify()
    if pinned is None:
        new = f"the tree with root {proof.new_root.hex()} (size {proof.new_size} {_UNPINNED})"
    else:
        new = f"the tree of size {proof.new_size} with root {proof.new_root.hex()}"
    old = f"the tree of size {proof.old_size} with root {proof.old_root.hex()}"
    print(f"verified: {new} extends {old}")
    return 0


def _keygen(args: argparse.Namespace) -> int:
    out = Path(args.out)
    must_exist(out.parent)  # the folder of the key: "does not exist", not the key itself
    if out.exists():
        raise CheckpointError(f"{args.out} exists; refusing to overwrite a key")
    if args.type in ("ed25519", "cosigner"):
        make = generate_ed25519_key if args.type == "ed25519" else generate_cosigner_key
        try:
            skey, vkey = make(args.name)
        except CheckpointError as exc:
            if isinstance(exc.__cause__, ImportError):
                raise CheckpointError(f"{exc} (or use --type hmac)") from exc
            raise
        atomic_write(out, (skey + "\n").encode(), mode=0o600)
        print(vkey)
    else:
        key = generate_hmac_key(args.name)
        atomic_write(out, (key + "\n").encode(), mode=0o600)
        note(
            args,
            "warning: an HMAC verifier key is the secret key itself (printed on stdout): "
            "keep it secret; checkpoints it signs are not publicly verifiable",
        )
        print(key)
    return 0
