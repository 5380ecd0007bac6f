"""A witness process killed mid-request never cosigns two roots for one tree size."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import REPO

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, sign_checkpoint
from merkle_memory.errors import WitnessError
from merkle_memory.proof import consistency_proof
from merkle_memory.signed_note import CosignatureSigner, Ed25519Signer, open_note, parse_note
from merkle_memory.tlog import WitnessClient

pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")

ORIGIN = "example.com/agents/cc"
LOG = Ed25519Signer("example.com/agents", bytes(range(32)))
WITNESS = CosignatureSigner("witness.example/w1", bytes(range(64, 96)))
HISTORIES = [[rfc6962.hash_leaf(b"%d-%d" % (k, i)) for i in range(400)] for k in range(2)]
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")

# Runs the command line with Witness._cosign made to die (os._exit) right after the state
# update of the request for size CRASH_SIZE was committed: a crash between commit and answer.
_CRASHING = """
import os, sys
from merkle_memory.tlog import witness
from merkle_memory.cli import main
crash_size = int(os.environ["CRASH_SIZE"])
real = witness.Witness._cosign
def cosign(self, checkpoint):
    if checkpoint.size == crash_size:
        os._exit(9)
    return real(self, checkpoint)
witness.Witness._cosign = cosign
sys.exit(main(sys.argv[1:]))
"""


def _note(size: int, history: int) -> str:
    leaves = HISTORIES[history]
    return sign_checkpoint(Checkpoint(ORIGIN, size, rfc6962.root(leaves[:size])), [LOG])


def _files(tmp_path: Path) -> list[str]:
    (tmp_path / "witness.key").write_text(WITNESS.skey() + "\n")
    (tmp_path / "log.vkey").write_text(LOG.verifier().vkey() + "\n")
    return [
        "witness",
        "serve",
        "--db",
        str(tmp_path / "witness.db"),
        "--key",
        str(tmp_path / "witness.key"),
        "--log",
        f"{ORIGIN}={tmp_path / 'log.vkey'}",
        "--listen",
        "127.0.0.1:0",
    ]


def _start(
    args: list[str], script: str | None = None, **env: str
) -> tuple[subprocess.Popen[str], str]:
    command = (
        [sys.executable, "-c", script, *args]
        if script
        else [sys.executable, "-m", "merkle_memory", *args]
    )
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    found = _LISTENING.search(line)
    assert found, line
    return process, found.group(1)


def _cosigned(note: str, lines: str) -> tuple[int, bytes]:
    opened = open_note(parse_note(note).text + "\n" + lines, [WITNESS.verifier()])
    checkpoint = Checkpoint.from_text(opened.text)
    return checkpoint.size, checkpoint.root


def test_a_crash_between_commit_and_answer_is_safe(tmp_path: Path) -> None:
    """The witness dies after committing size 9 of history A, before answering: the client
    gets no answer; the restarted witness answers 409 with size 9 (its state moved), then
    cosigns A's size 9 again, and refuses history B's size 9 (another root)."""
    args = _files(tmp_path)
    process, url = _start(args, _CRASHING, CRASH_SIZE="9")
    try:
        client = WitnessClient(url, timeout=30)
        client.add_checkpoint(_note(5, 0), 0)
        with pytest.raises(WitnessError) as died:
            client.add_checkpoint(_note(9, 0), 5, consistency_proof(5, 9, HISTORIES[0]))
        assert died.value.status is None
    finally:
        process.wait(timeout=30)
    assert process.returncode == 9
    process, url = _start(args)
    try:
        client = WitnessClient(url, timeout=30)
        with pytest.raises(WitnessError) as moved:
            client.add_checkpoint(_note(9, 1), 5, consistency_proof(5, 9, HISTORIES[1]))
        assert (moved.value.status, moved.value.size) == (409, 9)
        lines = client.add_checkpoint(_note(9, 0), 9)
        assert _cosigned(_note(9, 0), lines) == (9, rfc6962.root(HISTORIES[0][:9]))
        with pytest.raises(WitnessError) as fork:
            client.add_checkpoint(_note(9, 1), 9)
        assert fork.value.status == 409
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert process.returncode == 0  # SIGTERM stops the server cleanly


@pytest.mark.slow
def test_killed_at_random_moments_never_cosigns_two_roots_for_one_size(tmp_path: Path) -> None:
    """Four threads race two conflicting histories of 40 logs (the same first request, old 0,
    for two different trees of one size, then an extension) while the witness process is
    killed (SIGKILL) at random moments and restarted, 8 times: every cosignature received
    verifies, each log got exactly one history cosigned, and no size of any log was ever
    cosigned with two roots."""
    origins = [f"example.com/race/{i}" for i in range(40)]
    args = _files(tmp_path)
    for origin in origins:
        args += ["--log", f"{origin}={tmp_path / 'log.vkey'}"]
    state = {"url": ""}
    received: list[tuple[str, int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def submit(note: str, old: int, proof: list[bytes]) -> str | WitnessError:
        while not stop.is_set():
            try:
                return WitnessClient(state["url"], timeout=10).add_checkpoint(note, old, proof)
            except WitnessError as exc:
                if exc.status is not None:
                    return exc
                time.sleep(0.01)  # the witness is down: ask again
        return WitnessError("stopped")

    def push(history: int) -> None:
        leaves = HISTORIES[history]
        for origin in origins:
            first = _race_note(origin, 5, history)
            answer = submit(first, 0, [])
            if isinstance(answer, WitnessError) and answer.size == 5:
                answer = submit(first, 5, [])  # a lost race, or our own answer lost in a kill
            if isinstance(answer, WitnessError):
                continue
            with lock:
                received.append((origin, *_cosigned(first, answer)))
            second = _race_note(origin, 9, history)
            answer = submit(second, 5, consistency_proof(5, 9, leaves))
            if isinstance(answer, WitnessError) and answer.size == 9:
                answer = submit(second, 9, [])
            if not isinstance(answer, WitnessError):
                with lock:
                    received.append((origin, *_cosigned(second, answer)))

    process, state["url"] = _start(args)
    threads = [threading.Thread(target=push, args=(k % 2,)) for k in range(4)]
    for thread in threads:
        thread.start()
    rng = random.Random(18)
    try:
        for _ in range(8):
            time.sleep(rng.uniform(0.05, 0.3))
            process.kill()
            process.wait(timeout=30)
            process, state["url"] = _start(args)
        for thread in threads:
            thread.join(timeout=120)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    roots: dict[tuple[str, int], set[bytes]] = {}
    for origin, size, root in received:
        roots.setdefault((origin, size), set()).add(root)
    assert {key: len(r) for key, r in roots.items() if len(r) > 1} == {}
    assert {origin for origin, size in roots if size == 5} == set(origins)
    assert {origin for origin, size in roots if size == 9} == set(origins)


def _race_note(origin: str, size: int, history: int) -> str:
    leaves = HISTORIES[history]
    return sign_checkpoint(Checkpoint(origin, size, rfc6962.root(leaves[:size])), [LOG])
