"""``ledger tiles|witness|verify-checkpoint``, ``prove/verify-proof --bundle``, ``keygen --type
cosigner`` (issue 18)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.ledger import Ledger
from merkle_memory.signed_note import (
    CosignatureVerifier,
    HmacKey,
    cosigner_from_key,
    signer_from_key,
    verifier_from_key,
)
from merkle_memory.tlog import Witness, WitnessServer

pytest.importorskip("cryptography", reason="witness keys need the optional extra 'ed25519'")

ORIGIN = "example.com/agents/cc"
LOG = HmacKey("example.com/agents", bytes(range(32)))


@pytest.fixture
def setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """A tenant with 9 entries, the log's key file, two witness key pairs made by keygen."""
    tenant = tmp_path / "cc"
    tenant.mkdir()
    Ledger(tenant / "ledger.jsonl").append_many(
        [(f"note-{i}", f"{i:064x}") for i in range(9)], ts=1_700_000_000.0
    )
    files = {"tenant": tenant, "log": tmp_path / "log.key"}
    files["log"].write_text(LOG.skey() + "\n")
    for name in ("w1", "w2"):
        key = tmp_path / f"{name}.key"
        code, out, _ = run_main(
            capsys, "ledger", "keygen", "--name", f"{name}.example", "--type", "cosigner",
            "--out", str(key),
        )  # fmt: skip
        assert code == 0
        (tmp_path / f"{name}.vkey").write_text(out)
        files[name], files[f"{name}v"] = key, tmp_path / f"{name}.vkey"
    return files


@pytest.fixture
def witness(setup: dict[str, Path], tmp_path: Path) -> Iterator[str]:
    """Witness w1 serving the log on loopback; yields its URL."""
    signer = cosigner_from_key(setup["w1"].read_text().strip())
    with WitnessServer(Witness(tmp_path / "w1.db", signer, {ORIGIN: [LOG]})) as server:
        yield server.url


def test_keygen_cosigner_writes_a_0x04_key(setup: dict[str, Path]) -> None:
    """--type cosigner writes a type-0x04 signer key and prints its verifier key."""
    skey = setup["w1"].read_text().strip()
    vkey = setup["w1v"].read_text().strip()
    assert cosigner_from_key(skey).verifier() == verifier_from_key(vkey)
    assert isinstance(verifier_from_key(vkey), CosignatureVerifier)
    assert setup["w1"].stat().st_mode & 0o777 == 0o600


def test_tiles_writes_then_writes_nothing_new(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger tiles` publishes the tree (JSON lists the files written); a second run writes
    nothing; without --json stdout is the checkpoint file."""
    out_dir = tmp_path / "public"
    args = [
        "ledger",
        "tiles",
        str(setup["tenant"]),
        str(out_dir),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    ]
    code, out, err = run_main(capsys, *args, "--json")
    assert code == 0 and "published tree of size 9 (was 0): 2 files written" in err
    document = json.loads(out)
    assert document["written"] == ["tile/0/000.p/9", "tile/entries/000.p/9"]
    assert (document["tree_size"], document["old_size"], document["checkpoint_written"]) == (
        9,
        0,
        True,
    )
    code, out, err = run_main(capsys, *args)
    assert code == 0 and out == (out_dir / "checkpoint").read_text()
    assert "0 files written, 0 already there" in err
    code, _, err = run_main(
        capsys,
        "ledger",
        "tiles",
        str(tmp_path / "nope"),
        str(out_dir),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    )
    assert code == 1 and err.startswith("error: ")


def test_witness_then_verify_checkpoint_with_a_quorum(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger witness` prints and keeps the cosigned checkpoint; `verify-checkpoint` accepts
    it with w1 (quorum 1) and refuses it when w2 is also required."""
    tenant = setup["tenant"]
    base = ["--origin", ORIGIN, "--key", str(setup["log"]), "--url", witness]
    code, out, _ = run_main(
        capsys, "ledger", "witness", str(tenant), *base, "--witness-key", str(setup["w1v"])
    )
    assert code == 0 and out == (tenant / "ledger.cosigned").read_text()
    assert "\u2014 w1.example " in out
    (tenant.parent / "log.vkey").write_text(LOG.skey() + "\n")  # HMAC: its key verifies too
    check = [
        "ledger",
        "verify-checkpoint",
        str(tenant / "ledger.cosigned"),
        "--key",
        str(tenant.parent / "log.vkey"),
    ]
    code, out, _ = run_main(capsys, *check, "--witness", str(setup["w1v"]), "--origin", ORIGIN)
    assert code == 0
    assert out.startswith(f"verified: {ORIGIN} tree size 9 root ")
    assert out.endswith("; cosigned by 1 of 1 trusted witnesses (w1.example), quorum 1\n")
    code, out, _ = run_main(
        capsys,
        *check,
        "--witness",
        setup["w1v"].read_text().strip(),  # a key string, not a file
        "--witness",
        str(setup["w2v"]),
        "--quorum",
        "1",
        "--json",
    )
    document = json.loads(out)
    assert code == 0 and [c["witness"] for c in document["cosignatures"]] == ["w1.example"]
    code, _, err = run_main(
        capsys, *check, "--witness", str(setup["w1v"]), "--witness", str(setup["w2v"])
    )
    assert code == 1
    assert (
        err == "error: checkpoint is cosigned by 1 of the trusted witnesses, the policy needs 2\n"
    )
    code, _, err = run_main(capsys, *check, "--quorum", "-1")
    assert code == 2


def test_witness_refusals_exit_1(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A wrong --witness-key, an unknown log (other origin: 404) and no witness at the URL are
    one `error:` line and exit 1; nothing is kept."""
    tenant = setup["tenant"]
    base = ["ledger", "witness", str(tenant), "--key", str(setup["log"])]
    code, _, err = run_main(
        capsys, *base, "--origin", ORIGIN, "--url", witness, "--witness-key", str(setup["w2v"])
    )
    assert code == 1 and "does not verify with its key" in err
    assert not (tenant / "ledger.cosigned").exists()
    code, _, err = run_main(capsys, *base, "--origin", "other.example/log", "--url", witness)
    assert code == 1 and "\nerror: witness refused (HTTP 404): unknown log 'other.example" in err
    code, _, err = run_main(
        capsys, *base, "--origin", ORIGIN, "--url", "http://127.0.0.1:9", "--timeout", "5"
    )
    assert code == 1 and "no answer" in err


def test_prove_bundle_then_verify_offline(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`prove --bundle` writes a .tlog-proof (the cosigned checkpoint once witnessed);
    `verify-proof --bundle` exits 0 for it and 1 for a tampered one or another memory id."""
    tenant = setup["tenant"]
    run_main(
        capsys,
        "ledger",
        "witness",
        str(tenant),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
        "--url",
        witness,
    )
    bundle = tmp_path / "note-4.tlog-proof"
    code, out, err = run_main(
        capsys,
        "ledger",
        "prove",
        str(tenant),
        "--memory-id",
        "note-4",
        "--bundle",
        str(bundle),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
        "--json",
    )
    assert code == 0 and json.loads(out)["cosigned_by"] == ["w1.example"]
    assert bundle.read_text().startswith("c2sp.org/tlog-proof@v1\nextra ")
    verify = ["ledger", "verify-proof", "--bundle", str(bundle), "--key", str(setup["log"])]
    code, out, _ = run_main(
        capsys, *verify, "--witness", str(setup["w1v"]), "--memory-id", "note-4"
    )
    assert code == 0
    assert out.startswith(
        "verified: memory id 'note-4' (seq 5) is leaf 4 of example.com/agents/cc tree size 9 root "
    )
    assert out.endswith("; cosigned by 1 trusted witness\n")
    code, out, _ = run_main(capsys, *verify, "--json")
    assert code == 0 and json.loads(out)["seq"] == 5
    code, _, err = run_main(capsys, *verify, "--memory-id", "note-5")
    assert code == 1 and "note-4" in err
    lines = bundle.read_text().split("\n")
    lines[3] = ("A" if lines[3][0] != "A" else "B") + lines[3][1:]
    bundle.write_text("\n".join(lines))
    code, _, err = run_main(capsys, *verify)
    assert code == 1 and err.startswith("error: root mismatch")
    code, _, _ = run_main(capsys, "ledger", "verify-proof", "--bundle", str(bundle))
    assert code == 2
    code, _, _ = run_main(
        capsys, "ledger", "verify-proof", "p.json", "--bundle", str(bundle), "--key", "k"
    )
    assert code == 2
    code, _, err = run_main(
        capsys, "ledger", "prove", str(tenant), "--memory-id", "note-4", "--bundle", str(bundle)
    )
    assert code == 2 and err.endswith(
        "error: --bundle needs --origin and --key (the log's signer key file)\n"
    )
    code, _, err = run_main(
        capsys, "ledger", "prove", str(tenant), "--memory-id", "note-4", "--bundle", str(bundle),
        "--origin", ORIGIN,
    )  # fmt: skip
    assert code == 2 and "error: --bundle needs --origin and --key" in err


def test_bundle_to_stdout_without_witnesses(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--bundle -` prints the bundle; without a cosigned checkpoint it carries a fresh one."""
    code, out, _ = run_main(
        capsys,
        "ledger",
        "prove",
        str(setup["tenant"]),
        "--memory-id",
        "note-0",
        "--bundle",
        "-",
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    )
    assert code == 0 and out.startswith("c2sp.org/tlog-proof@v1\n")
    assert out.split("\n\n", 1)[1].startswith(f"{ORIGIN}\n9\n")
    assert signer_from_key(setup["log"].read_text().strip()) == LOG
