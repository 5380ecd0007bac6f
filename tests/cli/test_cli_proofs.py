"""`merkle-memory ledger prove|consistency|checkpoint|verify-proof|keygen` (DESIGN section 7)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import run_main

from merkle_memory.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tenant(tmp_path: Path) -> Path:
    folder = tmp_path / "rocky"
    led = Ledger(folder / "ledger.jsonl")
    for i in range(11):
        led.append(f"m{i % 4}", f"{i:064x}", ts=1_700_000_000 + i)
    return folder


def test_prove_json_keys_and_verify_with_root(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --json prints the DESIGN keys plus `entry`; verify-proof --root accepts it (exit
    0) and a wrong root fails (exit 1, one error line)."""
    code, out, _ = run_main(capsys, "ledger", "prove", str(tenant), "--memory-id", "m2", "--json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == [
        "memory_id",
        "leaf_index",
        "tree_size",
        "leaf_hash",
        "root_hash",
        "inclusion_proof",
        "entry",
    ]
    assert (doc["memory_id"], doc["leaf_index"], doc["tree_size"]) == ("m2", 10, 11)
    line = (tenant / "ledger.jsonl").read_bytes().splitlines()[10]
    assert doc["entry"] == json.loads(line)
    proof_file = tmp_path / "p.json"
    proof_file.write_text(out)
    code, out, _ = run_main(
        capsys, "ledger", "verify-proof", str(proof_file), "--root", doc["root_hash"]
    )
    assert code == 0 and "verified" in out
    code, out, err = run_main(
        capsys, "ledger", "verify-proof", str(proof_file), "--root", "00" * 32
    )
    assert code == 1 and out == "" and err.startswith("error: root mismatch")
    doc["leaf_index"] = 9
    proof_file.write_text(json.dumps(doc))
    code, _, err = run_main(
        capsys, "ledger", "verify-proof", str(proof_file), "--root", doc["root_hash"]
    )
    assert code == 1 and err.count("\n") == 1


def test_consistency_json_keys(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """consistency --json prints the DESIGN keys and verifies against the new root."""
    code, out, _ = run_main(
        capsys, "ledger", "consistency", str(tenant), "--old-size", "4", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["old_size", "new_size", "old_root", "new_root", "consistency_proof"]
    assert (doc["old_size"], doc["new_size"]) == (4, 11)
    (tmp_path / "c.json").write_text(out)
    code, _, _ = run_main(
        capsys, "ledger", "verify-proof", str(tmp_path / "c.json"), "--root", doc["new_root"]
    )
    assert code == 0
    code, _, err = run_main(capsys, "ledger", "consistency", str(tenant), "--old-size", "0")
    assert code == 2 and err.endswith("error: argument --old-size: must be >= 1, not 0\n")
    code, _, err = run_main(capsys, "ledger", "consistency", str(tenant), "--old-size", "12")
    assert code == 1 and err.startswith("error:")


def test_checkpoint_and_verify_with_checkpoint(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """keygen + checkpoint --key print a signed note; verify-proof --checkpoint --key
    accepts a proof for that size, and refuses a checkpoint of another size. An HMAC keygen
    prints its verifier key, which is the secret key itself, with a warning saying so."""
    key = tmp_path / "log.key"
    code, out, err = run_main(
        capsys, "ledger", "keygen", "--name", "log.example/r", "--type", "hmac", "--out", str(key)
    )
    assert code == 0 and oct(key.stat().st_mode & 0o777) == "0o600"
    assert out == key.read_text() and out.startswith("PRIVATE+KEY+log.example/r+")
    assert err == (
        "warning: an HMAC verifier key is the secret key itself (printed on stdout): keep it "
        "secret; checkpoints it signs are not publicly verifiable\n"
    )
    (tmp_path / "verifier.key").write_text(out)
    code, note, _ = run_main(
        capsys, "ledger", "checkpoint", str(tenant), "--origin", "log.example/r", "--key", str(key)
    )
    assert (
        code == 0 and note.startswith("log.example/r\n11\n") and "\n\n\u2014 log.example/r " in note
    )
    (tmp_path / "cp.note").write_text(note)
    _, proof, _ = run_main(capsys, "ledger", "prove", str(tenant), "--memory-id", "m1", "--json")
    (tmp_path / "p.json").write_text(proof)
    args = [
        "ledger",
        "verify-proof",
        str(tmp_path / "p.json"),
        "--checkpoint",
        str(tmp_path / "cp.note"),
        "--key",
        str(tmp_path / "verifier.key"),  # what keygen printed
    ]
    assert run_main(capsys, *args)[0] == 0
    Ledger(tenant / "ledger.jsonl").append("late", "f" * 64)
    _, proof, _ = run_main(capsys, "ledger", "prove", str(tenant), "--memory-id", "m1", "--json")
    (tmp_path / "p.json").write_text(proof)
    code, _, err = run_main(capsys, *args)
    assert code == 1 and "tree size 11" in err
    code, _, err = run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "--json")
    assert (
        code == 0
        and json.loads(
            run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "--json")[1]
        )["tree_size"]
        == 12
    )


def test_usage_and_missing_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Missing tenant or file exits 1 with one error line; bad usage exits 2."""
    code, _, err = run_main(capsys, "ledger", "prove", str(tmp_path / "none"), "--memory-id", "x")
    assert code == 1 and err.startswith("error:")
    code, _, err = run_main(
        capsys, "ledger", "verify-proof", str(tmp_path / "none.json"), "--root", "00"
    )
    assert code == 1 and err.startswith("error:")
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run_main(
        capsys, "ledger", "verify-proof", str(tmp_path / "bad.json"), "--root", "00" * 32
    )
    assert code == 1 and "not JSON" in err
    assert run_main(capsys, "ledger", "verify-proof", str(tmp_path / "bad.json"))[0] == 2
    assert run_main(capsys, "ledger", "prove", str(tmp_path))[0] == 2


def test_subprocess_prove_and_verify(tenant: Path, tmp_path: Path) -> None:
    """`python -m merkle_memory ledger prove` and `verify-proof` work as a real process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "merkle_memory", "ledger"]
    done = subprocess.run(
        [*run, "prove", str(tenant), "--memory-id", "m0", "--json"],
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (tmp_path / "p.json").write_bytes(done.stdout)
    done = subprocess.run(
        [*run, "verify-proof", str(tmp_path / "p.json"), "--root", doc["root_hash"]],
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and b"verified" in done.stdout


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """A ledger of three entries (a0, a1, a2) at fixed times."""
    folder = tmp_path / "three"
    led = Ledger(folder / "ledger.jsonl")
    for i in range(3):
        led.append(f"a{i}", f"{i + 1:064x}", ts=1_700_000_000 + i)
    return folder


def _prove_doc(capsys: pytest.CaptureFixture[str], tenant: Path, mid: str) -> dict[str, Any]:
    code, out, _ = run_main(capsys, "ledger", "prove", str(tenant), "--memory-id", mid, "--json")
    assert code == 0
    doc: dict[str, Any] = json.loads(out)
    return doc


def _verify_doc(
    capsys: pytest.CaptureFixture[str], path: Path, doc: dict[str, Any], *trust: str
) -> tuple[int, str, str]:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return run_main(capsys, "ledger", "verify-proof", str(path), *trust)


def test_verify_proof_root_statement_names_an_unpinned_size(
    three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --root alone the result line says the size is the proof's claim; --size pins it
    and then the line states the size plainly."""
    doc = _prove_doc(capsys, three, "a0")
    root = doc["root_hash"]
    code, out, err = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", root)
    assert (code, err) == (0, "")
    assert out == (
        f"verified: leaf 0 (seq 1 of memory id 'a0') is in the tree with root {root} "
        "(size 3 as claimed by the proof; pin it with --size or --checkpoint)\n"
    )
    code, out, err = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", root, "--size", "3")
    assert (code, err) == (0, "")
    assert out == (
        f"verified: leaf 0 (seq 1 of memory id 'a0') is in the tree of size 3 with root {root}\n"
    )


def test_verify_proof_tampered_size_is_caught_when_pinned(
    three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tree_size 3 -> 4 still satisfies the audit path of leaf 0 (RFC 6962 shapes agree), so
    --root alone reports size 4 only as the proof's claim; --size 3 refuses it (exit 1)."""
    doc = _prove_doc(capsys, three, "a0")
    doc["tree_size"] = 4
    root = doc["root_hash"]
    code, out, _ = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", root)
    assert code == 0 and "(size 4 as claimed by the proof; pin it with" in out
    code, out, err = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", root, "--size", "3")
    assert (code, out) == (1, "")
    assert err == "error: --size 3 does not match the proof's tree size 4\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"memory_id": "a1"}, "the entry seals memory id 'a0', not 'a1'"),
        ({"leaf_index": 1}, "the entry has seq 1, not leaf_index + 1 = 2"),
        ({"entry.memory_id": "a1"}, "leaf_hash is not the leaf hash of the entry"),
        ({"entry.ts": 1_700_000_009}, "leaf_hash is not the leaf hash of the entry"),
        ({"entry": None}, "entry is not a ledger entry: entry is not a JSON object"),
    ],
)
def test_verify_proof_binds_id_and_position_to_the_entry(
    three: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    message: str,
) -> None:
    """Changing memory_id, leaf_index or the entry in a proof document fails verification
    (exit 1, one exact error line), whatever the trusted root."""
    doc = _prove_doc(capsys, three, "a0")
    for key, value in change.items():
        if key.startswith("entry."):
            doc["entry"][key[6:]] = value
        else:
            doc[key] = value
    code, out, err = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", doc["root_hash"])
    assert (code, out, err) == (1, "", f"error: {message}\n")


def test_verify_proof_without_entry_is_refused(
    three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A document without `entry` (it cannot bind the id) is refused, exit 1."""
    doc = _prove_doc(capsys, three, "a2")
    del doc["entry"]
    code, _, err = _verify_doc(capsys, tmp_path / "p.json", doc, "--root", doc["root_hash"])
    assert (code, err) == (1, "error: not an inclusion proof document: missing 'entry'\n")


def test_consistency_statement_root_mode(
    three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A consistency proof checked with --root alone names both sizes as claimed; with
    --size the trusted size may be the new or the old one."""
    _, out, _ = run_main(capsys, "ledger", "consistency", str(three), "--old-size", "2", "--json")
    doc = json.loads(out)
    new, old = doc["new_root"], doc["old_root"]
    code, out, _ = _verify_doc(capsys, tmp_path / "c.json", doc, "--root", new)
    assert code == 0
    assert out == (
        f"verified: the tree with root {new} (size 3 as claimed by the proof; pin it with "
        f"--size or --checkpoint) extends the tree of size 2 with root {old}\n"
    )
    code, out, _ = _verify_doc(capsys, tmp_path / "c.json", doc, "--root", old, "--size", "2")
    assert code == 0
    assert out == (
        f"verified: the tree of size 3 with root {new} extends the tree of size 2 with root {old}\n"
    )
    code, _, err = _verify_doc(capsys, tmp_path / "c.json", doc, "--root", new, "--size", "2")
    assert code == 1 and err.startswith("error: root mismatch")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--checkpoint", "cp.note"], "--checkpoint needs --key (the log's verifier key file)"),
        (["--root", "00" * 32, "--key", "k"], "--key goes with --checkpoint, not with --root"),
        (
            ["--checkpoint", "cp.note", "--key", "k", "--size", "3"],
            "--size goes with --root (a checkpoint carries its own size)",
        ),
        (["--root", "00" * 32, "--size", "-1"], "--size must be >= 0"),
    ],
)
def test_verify_proof_flag_combinations_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """Flags that do not go together exit 2 with argparse's usage and message, before any
    file is read (the proof file does not even exist)."""
    code, out, err = run_main(capsys, "ledger", "verify-proof", str(tmp_path / "none.json"), *flags)
    assert (code, out) == (2, "")
    assert err.startswith("usage: merkle-memory ledger verify-proof ")
    assert err.endswith(f"merkle-memory ledger verify-proof: error: {message}\n")


def test_keygen_without_cryptography_says_how_to_get_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """keygen (Ed25519 by default) without the `cryptography` package exits 1 with the pip
    command and the HMAC alternative, and writes no key file."""
    for name in [m for m in sys.modules if m.split(".")[0] == "cryptography"] + ["cryptography"]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of any of them now fails
    key = tmp_path / "signer.key"
    code, out, err = run_main(
        capsys, "ledger", "keygen", "--name", "log.example", "--out", str(key)
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: Ed25519 keys need the optional extra: pip install 'merkle_memory[ed25519]' "
        "(or use --type hmac)\n"
    )
    assert not key.exists()
    code, _, _ = run_main(
        capsys, "ledger", "keygen", "--name", "log.example", "--type", "hmac", "--out", str(key)
    )
    assert code == 0 and key.exists()


def test_prove_text_prints_the_entry_line(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json, prove prints `entry:` as the ledger line (the leaf data)."""
    code, out, _ = run_main(capsys, "ledger", "prove", str(three), "--memory-id", "a1")
    line = (three / "ledger.jsonl").read_text(encoding="utf-8").splitlines()[1]
    assert code == 0 and f"\nentry: {line}\n" in out


def _records(folder: Path, words: str) -> Path:
    """A tenant of four records (ids r0..r3) whose summaries end in ``words``."""
    from merkle_memory.ledger import Tenant

    tenant = Tenant(folder)
    for i in range(4):
        tenant.save({"id": f"r{i}", "summary": f"{i} {words}"})
    return folder


def test_a_fabricated_sidecar_is_reported_and_never_signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 14 item 2: with only ledger.tree swapped for the tree of a fabricated history
    (same ids and size), `ledger verify` is not ok (exit 1, one error line), `checkpoint
    --key` signs the ledger's own root, and the proof served has that root."""
    from merkle_memory import rfc6962

    tenant = _records(tmp_path / "rocky", "true")
    fake = _records(tmp_path / "fake", "fabricated")
    lines = (tenant / "ledger.jsonl").read_bytes().splitlines()
    true_root = rfc6962.root([rfc6962.hash_leaf(x) for x in lines])
    for folder in (tenant, fake):
        assert run_main(capsys, "ledger", "checkpoint", str(folder), "--origin", "o", "-q")[0] == 0
    (tenant / "ledger.tree").write_bytes((fake / "ledger.tree").read_bytes())
    capsys.readouterr()
    code, out, err = run_main(capsys, "ledger", "verify", str(tenant))
    assert code == 1 and err == (
        f"error: rocky: the Merkle sidecar of {tenant / 'ledger.jsonl'} differs from the ledger"
        " from leaf 0 (derived data: the next proof rebuilds it; unless the sidecar was"
        " damaged, the ledger's entries from that leaf on are not the ones it once held: a"
        " rollback of the ledger with its head, or another history: compare with a witnessed"
        " checkpoint first)\n"
    )
    key = tmp_path / "log.key"
    run_main(capsys, "ledger", "keygen", "--name", "o", "--type", "hmac", "--out", str(key))
    code, note, err = run_main(
        capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "--key", str(key), "-q"
    )
    assert code == 0 and note.startswith("o\n4\n" + base64.b64encode(true_root).decode() + "\n")
    code, out, _ = run_main(capsys, "ledger", "prove", str(tenant), "--memory-id", "r1", "--json")
    assert code == 0 and json.loads(out)["root_hash"] == true_root.hex()
    assert run_main(capsys, "ledger", "verify", str(tenant))[0] == 0


def test_a_zeroed_root_node_is_never_signed(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Zeroing the sidecar's root node (8 leaves: hash position 14) never gets `AAAA...=`
    signed: the checkpoint carries the ledger's root."""
    from merkle_memory.ledger.treelog import node_position

    tenant = tmp_path / "eight"  # 8 entries appended (cutting the fixture's 11 is a rollback)
    led = Ledger(tenant / "ledger.jsonl")
    for i in range(8):
        led.append(f"m{i % 4}", f"{i:064x}", ts=1_700_000_000 + i)
    assert run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "-q")[0] == 0
    code, good, _ = run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "-q")
    data = bytearray((tenant / "ledger.tree").read_bytes())
    at = 32 * node_position(3, 0)
    data[at : at + 32] = bytes(32)
    (tenant / "ledger.tree").write_bytes(bytes(data))
    code, note, _ = run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "-q")
    assert code == 0 and note == good and "AAAAAAAA" not in note


def test_a_mid_file_edit_refuses_prove_consistency_checkpoint(
    tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 14 item 2: after a sync, one entry of the middle is edited in place (verify says
    broken); prove, consistency and checkpoint exit 1 with one error line."""
    assert run_main(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "-q")[0] == 0
    path = tenant / "ledger.jsonl"
    path.write_bytes(path.read_bytes().replace(f"{4:064x}".encode(), f"{7:064x}".encode(), 1))
    for argv in (
        ("prove", str(tenant), "--memory-id", "m2"),
        ("consistency", str(tenant), "--old-size", "3"),
        ("checkpoint", str(tenant), "--origin", "o"),
    ):
        code, out, err = run_main(capsys, "ledger", *argv)
        assert (code, out) == (1, ""), argv
        assert err == (
            f"error: {path}: chain broken at seq 5 (entry 5 is unusable: entry hash does not"
            " match its contents (seq 5)); no proofs are served\n"
        )


def test_a_rolled_back_tenant_is_never_proven_or_signed(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line cut away while ledger.head still names seq 11 (a rollback: verify says
    broken at seq 11): prove, consistency, checkpoint and tiles exit 1 with verify's reason,
    and nothing is published."""
    from merkle_memory.signed_note import HmacKey

    path = tenant / "ledger.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in path.read_bytes().splitlines()[:10]))
    code, out, _ = run_main(capsys, "ledger", "verify", str(tenant), "--json")
    reason = "ledger.head records a later entry (seq 11) than the ledger holds (last seq 10)"
    assert (code, json.loads(out)["rocky"]["reason"]) == (1, reason)
    key = tmp_path / "log.key"
    key.write_text(HmacKey("o", bytes(32)).skey() + "\n")
    for argv in (
        ("prove", str(tenant), "--memory-id", "m2"),
        ("consistency", str(tenant), "--old-size", "3"),
        ("checkpoint", str(tenant), "--origin", "o", "--key", str(key)),
        ("tiles", str(tenant), str(tmp_path / "public"), "--origin", "o", "--key", str(key)),
    ):
        code, out, err = run_main(capsys, "ledger", *argv)
        assert (code, out) == (1, ""), argv
        assert err == (
            f"error: {path}: ledger chain broken at seq 11: {reason}; nothing is proven or "
            "signed; if the loss is known and accepted: merkle-memory ledger recover "
            f"{tenant} --accept-rollback\n"
        ), argv
    assert not (tmp_path / "public" / "checkpoint").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["ledger", "checkpoint", "TENANT", "--origin", "o", "--key", "KEY"],
        [
            "ledger",
            "prove",
            "TENANT",
            "--memory-id",
            "m2",
            "--bundle",
            "B",
            "--origin",
            "o",
            "--key",
            "KEY",
        ],
        ["witness", "serve", "--db", "W", "--key", "KEY", "--log", "o=KEY"],
    ],
    ids=["checkpoint", "prove-bundle", "witness-serve"],
)
def test_a_key_file_that_is_not_text_is_one_error_line(
    command: list[str], tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key file that is not UTF-8 (every command reading key files goes through one
    reader): ``error: FILE: not a key file (not UTF-8 text)``, exit 1, no traceback."""
    key = tmp_path / "bin.key"
    key.write_bytes(b"\xff\xfe\x00key")
    places = {
        "TENANT": str(tenant),
        "KEY": str(key),
        "B": str(tmp_path / "b"),
        "W": str(tmp_path / "w.db"),
    }
    argv = [places.get(a, a.replace("KEY", str(key))) for a in command]
    code, out, err = run_main(capsys, *argv)
    assert (code, out) == (1, "")
    assert err == f"error: {key}: not a key file (not UTF-8 text)\n"


def test_an_interrupt_while_importing_is_one_error_line() -> None:
    """Ctrl-C while ``python -m merkle_memory`` is still importing the package: ``error:
    interrupted``, exit 130, no traceback (the interrupt raised by the import itself)."""
    code = (
        "import builtins, runpy, sys\n"
        "real = builtins.__import__\n"
        "def interrupting(name, *args, **kwargs):\n"
        "    if name == 'cli' or name.endswith('.cli'):\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = interrupting\n"
        "sys.argv = ['merkle_memory', 'ledger', 'verify', '.']\n"
        "runpy.run_module('merkle_memory', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "error: interrupted\n")
