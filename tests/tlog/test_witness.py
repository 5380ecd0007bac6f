"""The witness (C2SP tlog-witness) on loopback: cosignatures, every refusal, atomic state."""

from __future__ import annotations

import base64
import sqlite3
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from merkle_memory import rfc6962
from merkle_memory.checkpoint import (
    Checkpoint,
    CheckpointClient,
    WitnessPolicy,
    open_cosigned_checkpoint,
    sign_checkpoint,
)
from merkle_memory.errors import WitnessError
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import prove_consistency
from merkle_memory.proof import consistency_proof
from merkle_memory.signed_note import CosignatureSigner, Ed25519Signer, open_note, parse_note
from merkle_memory.tlog import Witness, WitnessClient, WitnessServer, witness_ledger
from merkle_memory.tlog.witness import AddCheckpointRequest

pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")

ORIGIN = "example.com/agents/cc"
OTHER = "example.com/agents/rocky"
LOG = Ed25519Signer("example.com/agents", bytes(range(32)))
STRANGER = Ed25519Signer("example.com/agents", bytes(range(1, 33)))
WITNESS = CosignatureSigner("witness.example/w1", bytes(range(64, 96)))
LEAVES = [rfc6962.hash_leaf(b"leaf %d" % i) for i in range(64)]
FORK = [rfc6962.hash_leaf(b"fork %d" % i) for i in range(64)]


def _note(size: int, leaves: list[bytes] = LEAVES, origin: str = ORIGIN) -> str:
    return sign_checkpoint(Checkpoint(origin, size, rfc6962.root(leaves[:size])), [LOG])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WitnessServer]:
    """A witness for two logs, served on 127.0.0.1 (any free port)."""
    witness = Witness(
        tmp_path / "witness.db", WITNESS, {ORIGIN: [LOG.verifier()], OTHER: [LOG.verifier()]}
    )
    with WitnessServer(witness) as running:
        yield running


def _post(
    url: str, body: bytes, path: str = "/add-checkpoint", method: str = "POST"
) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url + path, data=body if method == "POST" else None)
    request.method = method
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def _body(old: int, note: str, proof: list[bytes] | None = None) -> bytes:
    return AddCheckpointRequest(old, tuple(proof or ()), note).to_bytes()


def _cosigned_root(note: str, lines: bytes) -> tuple[int, bytes]:
    """Check the answer's cosignature over ``note`` with the witness key; (size, root)."""
    text = parse_note(note).text
    opened = open_note(text + "\n" + lines.decode(), [WITNESS.verifier()])
    checkpoint = Checkpoint.from_text(opened.text)
    return checkpoint.size, checkpoint.root


def test_50_successive_checkpoints_of_a_growing_ledger(
    server: WitnessServer, tmp_path: Path
) -> None:
    """A ledger grows 50 times; each checkpoint goes to the witness with its consistency proof
    and comes back cosigned; a client with a 1-of-1 witness policy accepts each in turn."""
    tenant = tmp_path / "cc"
    tenant.mkdir()
    ledger = Ledger(tenant / "ledger.jsonl")
    policy = WitnessPolicy((WITNESS.verifier(),), 1)
    client = CheckpointClient(tmp_path / "trusted.note", [LOG.verifier()], ORIGIN, policy=policy)
    sizes = []
    for round_ in range(50):
        ledger.append_many(
            [(f"m{round_}-{j}", f"{round_:032x}{j:032x}") for j in range(round_ % 3 + 1)]
        )
        cosigned = witness_ledger(
            tenant, ORIGIN, [LOG], server.url, witness_keys=[WITNESS.verifier()]
        )
        checkpoint, cosigs = open_cosigned_checkpoint(cosigned, [LOG.verifier()], policy, ORIGIN)
        assert [c.witness for c in cosigs] == ["witness.example/w1"]
        old = client.latest
        proof = [] if old is None else list(prove_consistency(tenant, old.size).consistency_proof)
        assert client.update(cosigned, proof) == checkpoint
        assert (tenant / "ledger.cosigned").read_text() == cosigned
        sizes.append(checkpoint.size)
    assert sizes == sorted(set(sizes)) and len(sizes) == 50 and sizes[-1] == 99
    witness = Witness(tmp_path / "witness.db", WITNESS, {ORIGIN: [LOG.verifier()]})
    history = witness.history(ORIGIN)
    assert [size for size, _ in history] == sizes
    state = witness.state(ORIGIN)
    assert state is not None and state.size == 99 and state.root == checkpoint.root


def test_every_refusal_of_the_spec(server: WitnessServer) -> None:
    """404 unknown origin, 403 no valid log signature, 400 old > size or malformed, 409 with the
    size held as text/x.tlog.size, 409 another root for the same size, 422 a bad proof; none of
    them changes the state, and the same checkpoint again is cosigned again."""
    url = server.url
    status, kind, body = _post(url, _body(0, _note(5)))
    assert (status, kind) == (200, "text/plain; charset=utf-8")
    assert _cosigned_root(_note(5), body) == (5, rfc6962.root(LEAVES[:5]))

    assert _post(url, _body(5, _note(7, origin="unknown.example/log")))[0] == 404
    assert (
        _post(
            url,
            _body(5, sign_checkpoint(Checkpoint(ORIGIN, 7, rfc6962.root(LEAVES[:7])), [STRANGER])),
        )[0]
        == 403
    )
    raw = _note(7).rsplit(" ", 1)
    tampered = raw[0] + " " + base64.b64encode(bytes(68)).decode() + "\n"
    assert _post(url, _body(5, tampered))[0] == 403
    assert _post(url, _body(9, _note(7)))[0] == 400
    for garbage in (
        b"garbage",
        b"old 05\n\n" + _note(7).encode(),
        b"old 5\nnot base64!\n\n" + _note(7).encode(),
        b"old 5\n"
        + b"".join(base64.b64encode(bytes(32)) + b"\n" for _ in range(64))
        + b"\n"
        + _note(7).encode(),
        b"old 5\n\n\xff" + _note(7).encode(),
        b"old 5\n\nnot a checkpoint\n",
    ):
        assert _post(url, garbage)[0] == 400, garbage[:30]

    status, kind, body = _post(url, _body(3, _note(7), consistency_proof(3, 7, LEAVES)))
    assert (status, kind, body) == (409, "text/x.tlog.size", b"5\n")
    assert _post(url, _body(5, _note(5, FORK)))[0] == 409
    assert _post(url, _body(5, _note(7), consistency_proof(5, 7, FORK)))[0] == 422
    assert _post(url, _body(5, _note(7), consistency_proof(5, 7, LEAVES)[:-1]))[0] == 422
    assert _post(url, _body(0, _note(4, origin=OTHER), [LEAVES[0]]))[0] == 422
    assert _post(url, _body(5, _note(5), [LEAVES[0]]))[0] == 422

    assert _post(url, b"", path="/add-checkpoint", method="GET")[0] == 404
    assert _post(url, _body(5, _note(7)), path="/other")[0] == 404
    assert _post(url, b"x" * ((1 << 20) + 1))[0] == 413

    status, _, body = _post(url, _body(5, _note(5)))  # the same checkpoint: cosigned again
    assert status == 200 and _cosigned_root(_note(5), body) == (5, rfc6962.root(LEAVES[:5]))
    status, _, body = _post(url, _body(5, _note(7), consistency_proof(5, 7, LEAVES)))
    assert status == 200 and _cosigned_root(_note(7), body)[0] == 7


def test_client_errors_carry_the_status_and_size(server: WitnessServer) -> None:
    """WitnessClient turns a 409 into WitnessError(status=409, size=held), a 422 into status
    422, and no answer into status None."""
    client = WitnessClient(server.url)
    lines = client.add_checkpoint(_note(6), 0)
    assert _cosigned_root(_note(6), lines.encode())[0] == 6
    with pytest.raises(WitnessError) as conflict:
        client.add_checkpoint(_note(9), 2, consistency_proof(2, 9, LEAVES))
    assert (conflict.value.status, conflict.value.size) == (409, 6)
    with pytest.raises(WitnessError) as bad:
        client.add_checkpoint(_note(9), 6, consistency_proof(6, 9, FORK))
    assert (bad.value.status, bad.value.size) == (422, None)
    with pytest.raises(WitnessError) as gone:
        WitnessClient("http://127.0.0.1:9", timeout=5).add_checkpoint(_note(9), 6)
    assert gone.value.status is None
    with pytest.raises(WitnessError):
        WitnessClient("ftp://witness.example")


def test_racing_forks_never_get_two_roots_for_one_size(
    server: WitnessServer, tmp_path: Path
) -> None:
    """Four threads push four forks of one log (same key) at once, each retrying from the size
    the witness answers; every size cosigned has one root, in the answers and in the database."""
    forks = [
        LEAVES,
        FORK,
        *[[rfc6962.hash_leaf(b"f%d-%d" % (k, i)) for i in range(64)] for k in range(2)],
    ]
    cosigned: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def push(leaves: list[bytes]) -> None:
        client = WitnessClient(server.url)
        held = 0
        for size in range(1, 40):
            for _ in range(3):
                proof = consistency_proof(held, size, leaves) if 0 < held < size else []
                try:
                    lines = client.add_checkpoint(_note(size, leaves), held, proof)
                except WitnessError as exc:
                    if exc.status == 409 and exc.size is not None:
                        held = exc.size
                        if held >= size:
                            break
                        continue
                    break
                with lock:
                    cosigned.append(_cosigned_root(_note(size, leaves), lines.encode()))
                held = size
                break

    threads = [threading.Thread(target=push, args=(fork,)) for fork in forks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    roots: dict[int, set[bytes]] = {}
    for size, root in cosigned:
        roots.setdefault(size, set()).add(root)
    assert cosigned and all(len(r) == 1 for r in roots.values())
    with sqlite3.connect(tmp_path / "witness.db") as db:
        rows = db.execute("SELECT size, root FROM history WHERE origin = ?", (ORIGIN,)).fetchall()
    assert {size: {bytes(root)} for size, root in rows} == roots


def test_a_submission_prefix(tmp_path: Path) -> None:
    """With a prefix the endpoint is <prefix>/add-checkpoint (the URL includes the prefix);
    the bare /add-checkpoint is then 404."""
    witness = Witness(tmp_path / "w.db", WITNESS, {ORIGIN: [LOG.verifier()]})
    with WitnessServer(witness, prefix="/witness/w1/") as server:
        assert server.url.endswith("/witness/w1")
        lines = WitnessClient(server.url).add_checkpoint(_note(3), 0)
        assert _cosigned_root(_note(3), lines.encode())[0] == 3
        base = server.url.rsplit("/witness/w1", 1)[0]
        assert _post(base, _body(3, _note(3)))[0] == 404


def test_database_errors_are_witness_errors_naming_the_file(tmp_path: Path) -> None:
    """A database that cannot be opened, or a file that is not SQLite, is a WitnessError naming
    the file (never a raw sqlite3 error), when the witness is made and when it is used."""
    logs = {ORIGIN: [LOG.verifier()]}
    missing = tmp_path / "no-such-dir" / "w.db"
    with pytest.raises(WitnessError) as caught:
        Witness(missing, WITNESS, logs)
    assert str(caught.value) == f"{missing}: witness database error: unable to open database file"
    assert caught.value.status is None
    notadb = tmp_path / "notadb.file"
    notadb.write_bytes(b"not a database " * 200)
    with pytest.raises(WitnessError) as caught:
        Witness(notadb, WITNESS, logs)
    assert str(caught.value) == f"{notadb}: witness database error: file is not a database"
    path = tmp_path / "w.db"
    witness = Witness(path, WITNESS, logs)
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"w.db{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database " * 200)
    with pytest.raises(WitnessError, match=r"witness database error: file is not a database"):
        witness.state(ORIGIN)
    with pytest.raises(WitnessError, match=r"witness database error: file is not a database"):
        witness.add_checkpoint(f"old 0\n\n{_note(3)}".encode())
    with WitnessServer(witness) as server:  # the server answers 500, no traceback
        assert _post(server.url, f"old 0\n\n{_note(3)}".encode())[:2] == (
            500,
            "text/plain; charset=utf-8",
        )
