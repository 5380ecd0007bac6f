"""`merkle-memory ledger prove|consistency|checkpoint|verify-proof|keygen` (DESIGN section 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from merkle_memory.cli import main
from merkle_memory.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tenant(tmp_path: Path) -> Path:
    folder = tmp_path / "rocky"
    led = Ledger(folder / "ledger.jsonl")
    for i in range(11):
        led.append(f"m{i % 4}", f"{i:064x}", ts=1_700_000_000 + i)
    return folder


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_prove_json_keys_and_verify_with_root(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --json prints the DESIGN keys; verify-proof --root accepts it (exit 0) and a
    wrong root fails (exit 1, one error line)."""
    code, out, _ = _run(capsys, "ledger", "prove", str(tenant), "--memory-id", "m2", "--json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == [
        "memory_id",
        "leaf_index",
        "tree_size",
        "leaf_hash",
        "root_hash",
        "inclusion_proof",
    ]
    assert (doc["memory_id"], doc["leaf_index"], doc["tree_size"]) == ("m2", 10, 11)
    proof_file = tmp_path / "p.json"
    proof_file.write_text(out)
    code, out, _ = _run(
        capsys, "ledger", "verify-proof", str(proof_file), "--root", doc["root_hash"]
    )
    assert code == 0 and "verified" in out
    code, out, err = _run(capsys, "ledger", "verify-proof", str(proof_file), "--root", "00" * 32)
    assert code == 1 and out == "" and err.startswith("error: root mismatch")
    doc["leaf_index"] = 9
    proof_file.write_text(json.dumps(doc))
    code, _, err = _run(
        capsys, "ledger", "verify-proof", str(proof_file), "--root", doc["root_hash"]
    )
    assert code == 1 and err.count("\n") == 1


def test_consistency_json_keys(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """consistency --json prints the DESIGN keys and verifies against the new root."""
    code, out, _ = _run(capsys, "ledger", "consistency", str(tenant), "--old-size", "4", "--json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["old_size", "new_size", "old_root", "new_root", "consistency_proof"]
    assert (doc["old_size"], doc["new_size"]) == (4, 11)
    (tmp_path / "c.json").write_text(out)
    code, _, _ = _run(
        capsys, "ledger", "verify-proof", str(tmp_path / "c.json"), "--root", doc["new_root"]
    )
    assert code == 0
    code, _, err = _run(capsys, "ledger", "consistency", str(tenant), "--old-size", "0")
    assert code == 1 and err.startswith("error:")


def test_checkpoint_and_verify_with_checkpoint(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """keygen + checkpoint --key print a signed note; verify-proof --checkpoint --key
    accepts a proof for that size, and refuses a checkpoint of another size."""
    key = tmp_path / "log.key"
    code, out, _ = _run(
        capsys, "ledger", "keygen", "--name", "log.example/r", "--type", "hmac", "--out", str(key)
    )
    assert code == 0 and out == "" and oct(key.stat().st_mode & 0o777) == "0o600"
    code, note, _ = _run(
        capsys, "ledger", "checkpoint", str(tenant), "--origin", "log.example/r", "--key", str(key)
    )
    assert (
        code == 0 and note.startswith("log.example/r\n11\n") and "\n\n\u2014 log.example/r " in note
    )
    (tmp_path / "cp.note").write_text(note)
    _, proof, _ = _run(capsys, "ledger", "prove", str(tenant), "--memory-id", "m1", "--json")
    (tmp_path / "p.json").write_text(proof)
    args = [
        "ledger",
        "verify-proof",
        str(tmp_path / "p.json"),
        "--checkpoint",
        str(tmp_path / "cp.note"),
        "--key",
        str(key),
    ]
    assert _run(capsys, *args)[0] == 0
    Ledger(tenant / "ledger.jsonl").append("late", "f" * 64)
    _, proof, _ = _run(capsys, "ledger", "prove", str(tenant), "--memory-id", "m1", "--json")
    (tmp_path / "p.json").write_text(proof)
    code, _, err = _run(capsys, *args)
    assert code == 1 and "tree size 11" in err
    code, _, err = _run(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "--json")
    assert (
        code == 0
        and json.loads(
            _run(capsys, "ledger", "checkpoint", str(tenant), "--origin", "o", "--json")[1]
        )["tree_size"]
        == 12
    )


def test_usage_and_missing_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Missing tenant or file exits 1 with one error line; bad usage exits 2."""
    code, _, err = _run(capsys, "ledger", "prove", str(tmp_path / "none"), "--memory-id", "x")
    assert code == 1 and err.startswith("error:")
    code, _, err = _run(
        capsys, "ledger", "verify-proof", str(tmp_path / "none.json"), "--root", "00"
    )
    assert code == 1 and err.startswith("error:")
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = _run(
        capsys, "ledger", "verify-proof", str(tmp_path / "bad.json"), "--root", "00" * 32
    )
    assert code == 1 and "not JSON" in err
    assert _run(capsys, "ledger", "verify-proof", str(tmp_path / "bad.json"))[0] == 2
    assert _run(capsys, "ledger", "prove", str(tmp_path))[0] == 2


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
