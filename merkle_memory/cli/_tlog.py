"""``merkle-memory ledger tiles|verify-tiles|witness|verify-checkpoint``, ``witness serve``, and
the ``--bundle`` forms of ``ledger prove`` / ``ledger verify-proof`` (issues 18, 19).

``ledger tiles`` reads a tenant folder or a ``postgresql://...#tenant`` and writes a folder or
an ``s3://bucket/prefix`` of an S3-compatible object store (``--endpoint``, ``--region``; the
credentials come from boto3's chain: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, ...); ``ledger verify-tiles`` reads a folder, an ``http(s)://`` URL or an
``s3://`` location.

Key files hold one key string a line (blank lines and ``#`` comments ignored), as for
``ledger checkpoint``: ``--key`` of ``tiles``/``witness``/``prove`` is the log's signer key file,
``--key`` of ``verify-checkpoint``/``verify-proof`` the log's verifier key file; a ``--witness``
file holds witness verifier keys (``cosignature/v1``, type 0x04, as ``ledger keygen --type
cosigner`` prints; an Ed25519 0x01 verifier key is taken as the witness's public key), each key
one witness. ``witness serve --key`` is the witness's signer key file (type 0x04, or an Ed25519
signer key), ``--log`` a log's verifier key file, ``ORIGIN=FILE`` to give the log's origin when
it is not the key's name.

Key roles are checked: where a log's key is wanted (``--key`` of every command, ``--log``), a
witness's cosigner key (type 0x04) is refused; where a verifier key is wanted, a private signer
key (``PRIVATE+KEY+...``) is refused, except an HMAC key, whose only form it is.

JSON documents (``--json``):

- ``tiles``: ``{origin, tree_size, root_hash, old_size, written: [path], kept: [path],
  checkpoint_written}``;
- ``verify-tiles``: ``{origin, tree_size, root_hash, checked, entries}``;
- ``witness``: ``{origin, tree_size, root_hash, note, cosigned_by: [name]}``;
- ``verify-checkpoint``: ``{origin, tree_size, root_hash, cosignatures: [{witness, key_id,
  timestamp}]}``;
- ``prove --bundle``: ``{bundle, memory_id, leaf_index, tree_size, root_hash, cosigned_by}``;
- ``verify-proof --bundle``: ``{memory_id, seq, leaf_index, tree_size, root_hash, origin,
  cosignatures: [...]}``.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._fsio import atomic_write, read_regular_file
from .._pg import is_url
from ..checkpoint import Checkpoint, Cosignature, WitnessPolicy, open_cosigned_checkpoint
from ..errors import CheckpointError, LedgerError, TileError
from ..ledger import PostgresLedgerStore
from ..signed_note import (
    CosignatureVerifier,
    Verifier,
    cosigner_from_key,
    cosigner_verifier_from_key,
    log_signer_from_key,
    log_verifier_from_key,
    parse_note,
)
from ..tlog import (
    FolderSink,
    FolderTiles,
    HttpTiles,
    ProofBundle,
    S3Tiles,
    TileClient,
    TileFetcher,
    publish_tiles,
    verify_ledger_bundle,
    witness_ledger,
)
from ..tlog.publish import ledger_bundle
from ..tlog.s3 import ATTEMPTS, DEFAULT_TIMEOUT, is_s3_url
from ..tlog.tiles import CHECKPOINT_PATH, MAX_CHECKPOINT_SIZE
from ..tlog.witness import MAX_TIMEOUT, Witness, WitnessServer
from ._output import (
    CommandGroup,
    keys_from,
    must_exist,
    note,
    print_json,
    write_stdout,
)

__all__ = [
    "add_policy_arguments",
    "policy",
    "prove_bundle",
    "register_ledger",
    "register_witness",
    "verify_bundle",
]

_TILES_EPILOG = """\
examples:
  merkle-memory ledger tiles agents/cc public/cc --origin example.com/agents/cc --key signer.key
  merkle-memory ledger tiles agents/cc public/cc --origin example.com/agents/cc \\
      --key signer.key --json
  merkle-memory ledger tiles 'postgresql:///agents?host=/run/pg#cc' s3://logs/cc \\
      --endpoint http://127.0.0.1:9000 --origin example.com/agents/cc --key signer.key \\
      --timeout 5
  python -m http.server --directory public/cc 8000   # any static file server serves them

S3: the credentials come from boto3's usual chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
(and AWS_SESSION_TOKEN), AWS_PROFILE and ~/.aws/credentials, an instance role. Without
--endpoint / --region, AWS_ENDPOINT_URL / AWS_REGION (else AWS, us-east-1). Needs the extra
s3: pip install 'merkle_memory[s3]'. Each request waits --timeout seconds (default 10) for a
connection and for each read of the answer, and is tried 3 times: an endpoint that is down or
never answers fails in about 35 s, with one error line naming it."""

_VERIFY_TILES_EPILOG = """\
examples:
  merkle-memory ledger verify-tiles public/cc --key verifier.key
  merkle-memory ledger verify-tiles https://logs.example/cc --key verifier.key \\
      --origin example.com/agents/cc --json
  merkle-memory ledger verify-tiles s3://logs/cc --endpoint http://127.0.0.1:9000 \\
      --key verifier.key --witness w1.vkey --quorum 1 --timeout 5

S3 credentials: as for `ledger tiles` (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
...); a public bucket can also be read over plain HTTP(S) with its URL. --timeout (default 10
s) bounds the wait for a connection and for each read; an s3:// request is tried 3 times, an
http(s):// one once."""

_WITNESS_EPILOG = """\
examples:
  merkle-memory ledger witness agents/cc --origin example.com/agents/cc --key signer.key \\
      --url http://127.0.0.1:7380 --witness-key witness.vkey
  merkle-memory ledger witness agents/cc --origin example.com/agents/cc --key signer.key \\
      --url https://witness.example/w1 --json
  merkle-memory ledger witness 'postgresql:///agents?host=/run/pg#cc' \\
      --origin example.com/agents/cc --key signer.key --url http://127.0.0.1:7380"""

_VERIFY_CHECKPOINT_EPILOG = """\
examples:
  merkle-memory ledger verify-checkpoint agents/cc/ledger.cosigned --key verifier.key
  merkle-memory ledger verify-checkpoint cc.note --key verifier.key \\
      --witness w1.vkey --witness w2.vkey --witness w3.vkey --quorum 2"""

_SERVE_EPILOG = """\
examples:
  merkle-memory witness serve --db witness.db --key witness.key --log cc.vkey \\
      --listen 127.0.0.1:7380
  merkle-memory witness serve --db witness.db --key witness.key \\
      --log example.com/agents/cc=cc.vkey --log example.com/agents/rocky=rocky.vkey \\
      --listen 127.0.0.1:0"""


def register_ledger(ledger: CommandGroup) -> None:
    """Add ``ledger tiles``, ``ledger witness`` and ``ledger verify-checkpoint``."""
    p = ledger.add_parser(
        "tiles",
        help="publish the ledger as C2SP tlog-tiles",
        description="Write the tenant's Merkle tree as C2SP tlog-tiles under OUT_DIR: "
        "tile/<L>/<N>[.p/<W>] hash tiles, tile/entries/<N> entry bundles (the ledger lines) "
        "and the signed checkpoint. Incremental: only tiles new since the checkpoint already "
        "in OUT_DIR are written, each once (an existing tile is never rewritten), and the "
        "checkpoint is replaced last, atomically. Every run first checks the published "
        "checkpoint's signature and what it needs: a missing tile or bundle is written again "
        "from the ledger; a tile or bundle whose bytes differ from what this run would write "
        "is refused, named, never rewritten. A tenant whose ledger lost entries its head "
        "records (a rollback, as verify reports it) is never published. Any "
        "static file server can serve OUT_DIR. OUT_DIR may be s3://bucket/prefix of an "
        "S3-compatible object store (--endpoint): the same objects under the prefix, every "
        "tile and bundle PUT acknowledged before the checkpoint's PUT, no conditional writes "
        "relied on (the ledger is the only sequencer; a re-run after a crash PUTs the same "
        "bytes). Exit 1 if OUT_DIR holds another log (another origin or key name), a larger "
        "tree, a checkpoint with a bad signature or a damaged tile or bundle (named), writing "
        "nothing, for a broken or rolled-back chain, or if the object store fails or does not "
        "answer within --timeout.",
        epilog=_TILES_EPILOG,
    )
    p.add_argument(
        "tenant",
        metavar="TENANT",
        help="tenant directory holding ledger.jsonl, or postgresql://...#tenant",
    )
    p.add_argument(
        "out_dir", metavar="OUT_DIR", help="the tiles' root folder (created), or s3://bucket/prefix"
    )
    p.add_argument("--origin", required=True, metavar="NAME", help="the log's origin line")
    p.add_argument("--key", required=True, metavar="FILE", help="the log's signer key file")
    p.add_argument("--no-entries", action="store_true", help="hash tiles only, no bundles")
    _add_s3_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_tiles, tlog_parser=p)

    p = ledger.add_parser(
        "verify-tiles",
        help="verify a published tiled log: every tile and bundle against its checkpoint",
        description="Fetch LOCATION's checkpoint, verify it with the log's verifier key (and "
        "the witness quorum with --witness), then fetch every tile and entry bundle of its "
        "tree and check each against the signed root (the tiles client: a full tile against "
        "its parent hash, the right edge against the root, every entry against its leaf "
        "hash). LOCATION is a folder, an http(s):// URL or s3://bucket/prefix (--endpoint). "
        "Nothing served is trusted but the signed checkpoint. Exit 0 verified, 1 not (a "
        "missing, malformed or altered tile or bundle, named; a bad signature; no answer "
        "within --timeout).",
        epilog=_VERIFY_TILES_EPILOG,
    )
    p.add_argument(
        "location",
        metavar="LOCATION",
        help="the log's folder, http(s):// URL or s3://bucket/prefix",
    )
    p.add_argument("--key", required=True, metavar="FILE", help="the log's verifier key file")
    p.add_argument("--origin", metavar="NAME", help="the origin the checkpoint must have")
    p.add_argument(
        "--no-entries", action="store_true", help="check the hash tiles only, not the bundles"
    )
    add_policy_arguments(p)
    _add_s3_arguments(p, http=True)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_verify_tiles, tlog_parser=p)

    p = ledger.add_parser(
        "witness",
        help="get the ledger's checkpoint cosigned by a witness",
        description="Sign the tenant's checkpoint and submit it to a C2SP tlog-witness "
        "(POST URL/add-checkpoint) with the consistency proof from the size the witness "
        "holds; keep the cosigned checkpoint in TENANT/ledger.cosigned (cosignatures of "
        "other witnesses for the same checkpoint are kept; a database tenant keeps it, and "
        "ledger.witnesses, as rows of mm_ledger_files) and print it. Exit 1 when the "
        "witness refuses (its HTTP status is in the message) or cannot be reached.",
        epilog=_WITNESS_EPILOG,
    )
    p.add_argument(
        "tenant",
        metavar="TENANT",
        help="tenant directory holding ledger.jsonl, or postgresql://...#tenant",
    )
    p.add_argument("--origin", required=True, metavar="NAME", help="the log's origin line")
    p.add_argument("--key", required=True, metavar="FILE", help="the log's signer key file")
    p.add_argument("--url", required=True, metavar="URL", help="the witness's prefix URL")
    p.add_argument(
        "--witness-key",
        metavar="FILE",
        help="the witness's verifier key file: its answer must verify with it",
    )
    p.add_argument(
        "--timeout", type=_timeout, default=30.0, metavar="S", help="seconds, > 0 (default: 30)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_witness)

    p = ledger.add_parser(
        "verify-checkpoint",
        help="verify a checkpoint's signature and witness quorum",
        description="Check a signed checkpoint with the log's verifier key and, with "
        "--witness, that at least --quorum of those witnesses cosigned it (cosignature/v1). "
        "Signatures by unknown keys are ignored; a bad one by a known key fails the check. "
        "Exit 0 valid, 1 invalid.",
        epilog=_VERIFY_CHECKPOINT_EPILOG,
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="the signed checkpoint file")
    p.add_argument("--key", required=True, metavar="FILE", help="the log's verifier key file")
    p.add_argument("--origin", metavar="NAME", help="the origin the checkpoint must have")
    add_policy_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_verify_checkpoint, tlog_parser=p)


def register_witness(witness: CommandGroup) -> None:
    """Add ``witness serve``."""
    p = witness.add_parser(
        "serve",
        help="run a C2SP tlog-witness over HTTP",
        description="Serve POST /add-checkpoint (C2SP tlog-witness) until interrupted: "
        "cosign (cosignature/v1) each checkpoint of a known log that is signed by its key "
        "and consistent with the last one cosigned, keeping that state in the SQLite file "
        "--db; answer 404 unknown log, 403 bad signature, 400 bad request, 409 wrong old "
        "size (body: the size held, text/x.tlog.size), 422 bad proof. Prints the URL it "
        "listens on to stderr.",
        epilog=_SERVE_EPILOG,
    )
    p.add_argument("--db", required=True, metavar="FILE", help="the witness's SQLite state")
    p.add_argument("--key", required=True, metavar="FILE", help="the witness's signer key file")
    p.add_argument(
        "--log",
        required=True,
        action="append",
        metavar="[ORIGIN=]FILE",
        help="a log's verifier key file (repeatable); the origin is the key's name unless "
        "given as ORIGIN=FILE",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:7380",
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:7380; port 0: any free port)",
    )
    p.add_argument("--prefix", default="", metavar="PATH", help="submission prefix path")
    p.set_defaults(func=_serve, tlog_parser=p)


def _add_s3_arguments(p: argparse.ArgumentParser, *, http: bool = False) -> None:
    where = "s3:// and http(s)://" if http else "s3://"
    p.add_argument(
        "--timeout",
        type=_timeout,
        metavar="SECONDS",
        help=f"{where} only: seconds to wait for the server to connect and for each read of "
        f"its answer, > 0 (default: {DEFAULT_TIMEOUT:g}); s3:// tries each request "
        f"{ATTEMPTS} times, so a dead endpoint fails in about {ATTEMPTS} x SECONDS + 3 s",
    )
    p.add_argument(
        "--endpoint",
        metavar="URL",
        help="s3:// only: the S3 endpoint (http://127.0.0.1:9000 for an S3-compatible "
        "server; default: AWS_ENDPOINT_URL, else AWS)",
    )
    p.add_argument(
        "--region",
        metavar="NAME",
        help="s3:// only: the signing region (default: AWS_REGION or the profile's, else "
        "us-east-1)",
    )


def _s3_or_none(args: argparse.Namespace, location: str) -> S3Tiles | None:
    """``S3Tiles`` for an ``s3://`` location (with ``--endpoint``/``--region``), else ``None``."""
    if is_s3_url(location):
        return S3Tiles(
            location,
            endpoint=args.endpoint,
            region=args.region,
            timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
        )
    return None


def _is_http(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _misplaced_s3_options(args: argparse.Namespace, location: str, *, http: bool = False) -> str:
    """The usage error of ``--endpoint``/``--region`` given for a location that is not
    ``s3://`` (or of ``--timeout`` given for a folder), else ``""``."""
    if is_s3_url(location):
        return ""
    if args.endpoint is not None or args.region is not None:
        return "--endpoint and --region are for an s3://bucket/prefix location"
    if args.timeout is not None and not (http and _is_http(location)):
        where = "an s3:// or http(s):// location" if http else "an s3://bucket/prefix location"
        return f"--timeout is for {where}"
    return ""


def add_policy_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--witness FILE`` (repeatable) and ``--quorum K``."""
    p.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="KEY",
        help="a trusted witness's verifier key file, or the key string itself (repeatable)",
    )
    p.add_argument(
        "--quorum",
        type=int,
        metavar="K",
        help="how many of the --witness keys must have cosigned (default: all of them)",
    )


def _timeout(text: str) -> float:
    """An argparse ``type``: seconds, a finite number > 0 (at most a day); else exit 2."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds in (0, {MAX_TIMEOUT:g}], not {text!r}"
        )
    return value


def _ledger_source(tenant: str) -> PostgresLedgerStore | Path:
    """The ledger a command reads: the store of a ``postgresql://...#tenant`` found in the
    database (before anything is written), else a tenant folder holding ``ledger.jsonl``."""
    if is_url(tenant):
        return PostgresLedgerStore.existing(tenant)
    must_exist(tenant)
    folder = Path(tenant)
    if not folder.is_dir():
        raise LedgerError(f"{tenant}: not a tenant directory")
    if not (folder / "ledger.jsonl").is_file():
        raise LedgerError(f"{tenant}: no ledger.jsonl")
    return folder


def policy(args: argparse.Namespace) -> WitnessPolicy | None:
    """The witness policy of ``--witness``/``--quorum`` (``None`` without witnesses).

    Raises:
        CheckpointError: a bad key, or ``--quorum`` without witnesses or above their number.
    """
    witnesses: list[CosignatureVerifier] = []
    for given in args.witness:
        if Path(given).is_file():
            witnesses.extend(keys_from(given, cosigner_verifier_from_key))
        else:  # a key string
            witnesses.append(cosigner_verifier_from_key(given))
    if not witnesses:
        if args.quorum:
            raise CheckpointError("--quorum needs --witness keys")
        return None
    quorum = len(witnesses) if args.quorum is None else args.quorum
    return WitnessPolicy(tuple(witnesses), quorum)


def _cosig_json(cosignatures: tuple[Cosignature, ...]) -> list[dict[str, Any]]:
    return [
        {"witness": c.witness, "key_id": f"{c.key_id:08x}", "timestamp": c.timestamp}
        for c in cosignatures
    ]


def _open(
    note_text: str | bytes,
    verifiers: Sequence[Verifier],
    trusted: WitnessPolicy | None,
    origin: str | None,
) -> tuple[Checkpoint, tuple[Cosignature, ...]]:
    return open_cosigned_checkpoint(note_text, verifiers, trusted or WitnessPolicy((), 0), origin)


def _tiles(args: argparse.Namespace) -> int:
    misplaced = _misplaced_s3_options(args, args.out_dir)
    if misplaced:
        return _usage(args, misplaced)
    sink = _s3_or_none(args, args.out_dir)
    source = _ledger_source(args.tenant)
    signers = keys_from(args.key, log_signer_from_key)
    target = sink if sink is not None else FolderSink(args.out_dir)
    report = publish_tiles(source, target, args.origin, signers, entries=not args.no_entries)
    data = target.read(CHECKPOINT_PATH)
    if data is None:
        raise TileError(f"{target.label}: the checkpoint is gone right after it was published")
    text = data.decode("utf-8")
    checkpoint = Checkpoint.from_text(parse_note(text).text)
    note(
        args,
        f"published tree of size {report.size} (was {report.old_size}): "
        f"{len(report.written)} files written"
        + (f" ({len(report.repaired)} missing ones re-created)" if report.repaired else "")
        + f", {len(report.kept)} already there",
    )
    if args.json:
        print_json(
            {
                "origin": checkpoint.origin,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "old_size": report.old_size,
                "written": list(report.written),
                "kept": list(report.kept),
                "repaired": list(report.repaired),
                "checkpoint_written": report.checkpoint_written,
            }
        )
    else:
        write_stdout(text)
    return 0


def _verify_tiles(args: argparse.Namespace) -> int:
    if args.quorum is not None and args.quorum < 0:
        return _usage(args, "--quorum must be >= 0")
    if args.quorum and not args.witness:
        return _usage(args, "--quorum needs --witness keys")
    location: str = args.location
    misplaced = _misplaced_s3_options(args, location, http=True)
    if misplaced:
        return _usage(args, misplaced)
    fetcher: TileFetcher | None = _s3_or_none(args, location)
    if fetcher is None:
        if _is_http(location):
            fetcher = HttpTiles(
                location, timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout
            )
        else:
            must_exist(location)
            if not Path(location).is_dir():
                raise TileError(f"{location}: not a folder")
            fetcher = FolderTiles(location)
    verifiers = keys_from(args.key, log_verifier_from_key)
    client = TileClient.open(fetcher, verifiers, args.origin, policy=policy(args))
    checked = client.audit(entries=not args.no_entries)
    checkpoint = client.checkpoint
    if args.json:
        print_json(
            {
                "origin": checkpoint.origin,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "checked": checked,
                "entries": not args.no_entries,
            }
        )
    else:
        what = "tiles" if args.no_entries else "tiles and entry bundles"
        print(
            f"verified: {checkpoint.origin} tree size {checkpoint.size} root "
            f"{checkpoint.root.hex()}: {checked} {what} checked"
        )
    return 0


def _witness(args: argparse.Namespace) -> int:
    signers = keys_from(args.key, log_signer_from_key)
    keys = keys_from(args.witness_key, cosigner_verifier_from_key) if args.witness_key else []
    if not keys:
        note(args, "warning: no --witness-key, the witness's answer is kept unchecked")
    cosigned = witness_ledger(
        _ledger_source(args.tenant),
        args.origin,
        signers,
        args.url,
        witness_keys=keys,
        timeout=args.timeout,
    )
    parsed = parse_note(cosigned)
    checkpoint = Checkpoint.from_text(parsed.text)
    if args.json:
        log_names = {s.name for s in signers}
        print_json(
            {
                "origin": checkpoint.origin,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "note": cosigned,
                "cosigned_by": [s.name for s in parsed.signatures if s.name not in log_names],
            }
        )
    else:
        write_stdout(cosigned)
    return 0


def _usage(args: argparse.Namespace, message: str, parser_name: str = "tlog_parser") -> int:
    """Print the command's usage and ``message`` on stderr; return argparse's exit code 2."""
    parser: argparse.ArgumentParser = getattr(args, parser_name)
    try:
        parser.error(message)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return 2  # pragma: no cover - parser.error always exits


def _read_checkpoint_file(path: str) -> bytes:
    """The bytes of the checkpoint file ``path`` a user named (``-``: stdin, read whole).

    A symlink the user names is followed (``os.path.realpath``), but the file must be a regular
    file of at most ``MAX_CHECKPOINT_SIZE`` bytes: a FIFO, a device (``/dev/zero``) or a
    folder is refused without blocking on it or reading it.

    Raises:
        CheckpointError: not a regular file, or too large.
        OSError: it does not exist or cannot be read.
    """
    if path == "-":
        return sys.stdin.buffer.read()

    def refuse(_where: str, why: str) -> CheckpointError:
        return CheckpointError(f"{path}: {why}: not a checkpoint file")

    data = read_regular_file(os.path.realpath(path), refuse, limit=MAX_CHECKPOINT_SIZE)
    if data is None:
        raise FileNotFoundError(2, "No such file or directory", path)
    return data


def _verify_checkpoint(args: argparse.Namespace) -> int:
    if args.quorum is not None and args.quorum < 0:
        return _usage(args, "--quorum must be >= 0")
    if args.quorum and not args.witness:
        return _usage(args, "--quorum needs --witness keys")
    verifiers = keys_from(args.key, log_verifier_from_key)
    trusted = policy(args)
    data = _read_checkpoint_file(args.checkpoint)
    checkpoint, cosignatures = _open(data, verifiers, trusted, args.origin)
    if args.json:
        print_json(
            {
                "origin": checkpoint.origin,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "cosignatures": _cosig_json(cosignatures),
            }
        )
    else:
        witnesses = ""
        if trusted is not None:
            names = ", ".join(c.witness for c in cosignatures) or "none"
            witnesses = (
                f"; cosigned by {len(cosignatures)} of {len(trusted.witnesses)} trusted "
                f"witnesses ({names}), quorum {trusted.quorum}"
            )
        print(
            f"verified: {checkpoint.origin} tree size {checkpoint.size} "
            f"root {checkpoint.root.hex()}{witnesses}"
        )
    return 0


def _serve(args: argparse.Namespace) -> int:
    signer = keys_from(args.key, cosigner_from_key, first=True)[0]
    logs: dict[str, list[Verifier]] = {}
    for item in args.log:
        origin, sep, path = item.partition("=")
        if not sep:
            origin, path = "", item
        for verifier in keys_from(path, log_verifier_from_key):
            logs.setdefault(origin or verifier.name, []).append(verifier)
    host, sep, port_text = args.listen.rpartition(":")
    if not sep or not port_text.isascii() or not port_text.isdigit():
        return _usage(args, f"--listen {args.listen!r} is not HOST:PORT")
    if int(port_text) > 65535:
        return _usage(args, f"--listen {args.listen!r}: port {port_text} is not in 0..65535")
    witness = Witness(args.db, signer, logs)
    server = WitnessServer(witness, host.strip("[]") or "127.0.0.1", int(port_text), args.prefix)
    print(
        f"witness {signer.name} ({signer.verifier().vkey()}) for "
        f"{', '.join(sorted(logs))} listening on {server.url}",
        file=sys.stderr,
        flush=True,
    )

    def on_sigterm(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # leave serve_forever in the main thread, then close

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
    return 0


def prove_bundle(args: argparse.Namespace) -> int:
    """``ledger prove --bundle FILE``: write the entry's tlog-proof bundle."""
    if not args.origin or not args.key:
        return _usage(
            args, "--bundle needs --origin and --key (the log's signer key file)", "proofs_parser"
        )
    signers = keys_from(args.key, log_signer_from_key)
    bundle = ledger_bundle(_ledger_source(args.tenant), args.memory_id, args.origin, signers)
    text = bundle.to_text()
    if args.bundle == "-":
        write_stdout(text)
    else:
        atomic_write(Path(args.bundle), text.encode("utf-8"))
    checkpoint = Checkpoint.from_text(parse_note(bundle.checkpoint).text)
    names = [s.name for s in parse_note(bundle.checkpoint).signatures]
    log_names = {s.name for s in signers}
    cosigned = [n for n in names if n not in log_names]
    note(
        args,
        f"bundle: memory id {args.memory_id!r}, leaf {bundle.index} of a tree of size "
        f"{checkpoint.size}" + (f", cosigned by {', '.join(cosigned)}" if cosigned else ""),
    )
    if args.json and args.bundle != "-":
        print_json(
            {
                "bundle": args.bundle,
                "memory_id": args.memory_id,
                "leaf_index": bundle.index,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "cosigned_by": cosigned,
            }
        )
    return 0


def verify_bundle(args: argparse.Namespace) -> int:
    """``ledger verify-proof --bundle FILE --key VKEY_FILE``: verify a bundle offline."""
    verifiers = keys_from(args.key, log_verifier_from_key)
    raw = sys.stdin.buffer.read() if args.bundle == "-" else Path(args.bundle).read_bytes()
    bundle = ProofBundle.from_text(raw)
    trusted = policy(args)
    _, cosignatures = _open(bundle.checkpoint, verifiers, trusted, args.origin)
    checkpoint, entry = verify_ledger_bundle(
        bundle, verifiers, origin=args.origin, policy=trusted, memory_id=args.memory_id
    )
    if args.json:
        print_json(
            {
                "memory_id": entry.memory_id,
                "seq": entry.seq,
                "leaf_index": bundle.index,
                "tree_size": checkpoint.size,
                "root_hash": checkpoint.root.hex(),
                "origin": checkpoint.origin,
                "cosignatures": _cosig_json(cosignatures),
            }
        )
    else:
        count = len(cosignatures)
        cosigned = (
            f"; cosigned by {count} trusted witness{'' if count == 1 else 'es'}" if trusted else ""
        )
        print(
            f"verified: memory id {entry.memory_id!r} (seq {entry.seq}) is leaf {bundle.index} "
            f"of {checkpoint.origin} tree size {checkpoint.size} root {checkpoint.root.hex()}"
            f"{cosigned}"
        )
    return 0
