"""Type-checked use of merkle_memory's public API (``mypy --strict tests/typing``).

Not a test module: pytest does not collect it. It exercises the everyday surface with the
types a user would write, so that a change in a public signature breaks ``mypy --strict``.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import assert_type

from hypothesis.strategies import SearchStrategy

import merkle_memory as mm
from merkle_memory import canonical, checkpoint, dag, proof, rfc6962, strategies
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.canonical import JSONValue
from merkle_memory.ledger import Entry, Ledger, VerifyReport, verify_ledger
from merkle_memory.ledger.tenant import SealReport, Tenant
from merkle_memory.signed_note import HmacKey


def canonical_json() -> str:
    """Canonical bytes and digests."""
    data: bytes = canonical.dumps({"b": 1, "a": [1.0, 2e-7]})
    value: object = canonical.loads(data)
    same: bytes = mm.dumps(value)
    assert same == data
    try:
        mm.dumps(float("nan"))
    except mm.CanonicalizationError as exc:
        _: object = exc.value
    return mm.digest({"hello": "world"})


def conversation() -> list[str]:
    """Node hashes of a two-turn conversation."""
    user = dag.Bucket.from_dict(
        {"type": "message", "role": "user", "content": [{"type": "text", "text": "hi"}]}
    )
    block: dag.ContentBlock = dag.ContentBlock.from_dict({"type": "text", "text": "hello"})
    reply = dag.Bucket(type="message", role="assistant", content=(block,))
    root: str = dag.node_hash(user, None)
    child = dag.Node.create(reply, root)
    graph = dag.Dag()
    graph.add(dag.Node.create(user, None))
    graph.add(child)
    return [n.hash for n in graph.leaves()]


def ledger(folder: Path) -> VerifyReport:
    """Seal and verify."""
    tenant = Tenant(folder)
    entry: Entry = tenant.save({"id": "m1", "summary": "we chose sqlite"})
    report: SealReport = tenant.seal()
    assert report.sealed_now == 0 and entry.seq == 1
    led = Ledger(folder / "ledger.jsonl")
    last: Entry | None = led.last()
    assert last is not None
    return verify_ledger(led.path, {"m1": last.content_sha256})


def memory_bank(folder: Path) -> bool:
    """Create, save and verify a bank."""
    bank = MemoryBank(folder)
    memory = Memory("fact", "project", "Project uses FastAPI", tags=("cli",))
    memory_id: str = bank.save(memory)
    stamped = Memory("fact", "project", "x", timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    assert stamped.id != memory_id
    return bank.verify().ok


def proofs() -> None:
    """Inclusion and consistency over four leaves, and a signed checkpoint."""
    leaves = [rfc6962.hash_leaf(bytes([i])) for i in range(4)]
    root: bytes = rfc6962.root(leaves)
    path: list[bytes] = proof.inclusion_proof(1, 4, leaves)
    proof.verify_inclusion(leaves[1], 1, 4, path, root)
    older: bytes = rfc6962.root(leaves[:2])
    proof.verify_consistency(2, 4, proof.consistency_proof(2, 4, leaves), older, root)
    key = HmacKey("example.com/log", bytes(32))
    note: str = checkpoint.sign_checkpoint(checkpoint.Checkpoint("example.com/log", 4, root), [key])
    assert checkpoint.open_checkpoint(note, [key]).size == 4


def hypothesis_strategies(folder: Path) -> None:
    """The strategies are SearchStrategy values of stated types, never of Any."""
    assert_type(strategies.json_values(max_depth=2), SearchStrategy[canonical.JSONValue])
    assert_type(strategies.json_values(tuples=True), SearchStrategy[canonical.JSONInput])
    assert_type(strategies.json_scalars(), SearchStrategy[canonical.JSONScalar])
    assert_type(strategies.memories(), SearchStrategy[Memory])
    assert_type(strategies.memory_fields(), SearchStrategy[strategies.MemoryFields])
    assert_type(strategies.block_dicts(), SearchStrategy[strategies.BlockDict])
    assert_type(strategies.bucket_dicts(), SearchStrategy[strategies.BucketDict])
    scenarios = strategies.ledger_scenarios(tamper=True)
    assert_type(scenarios, SearchStrategy[strategies.LedgerScenario])
    scenario = scenarios.example()
    assert_type(strategies.materialize_ledger(scenario, folder), Tenant)
    fields = strategies.memory_fields().example()
    memory = Memory(**fields)  # the TypedDict's keys are Memory's keyword arguments
    assert_type(memory.id, str)


def canonical_dump(path: Path) -> JSONValue:
    """dump writes bytes to a binary file; loads gives a JSONValue to narrow."""
    with path.open("wb") as fp:
        canonical.dump({"a": [1, 2.5]}, fp)
    value = canonical.loads(path.read_bytes())
    assert_type(value, JSONValue)
    if isinstance(value, dict):
        inner = value["a"]
        assert isinstance(inner, list)
    return value


if __name__ == "__main__":
    canonical_json()
    conversation()
    proofs()
    with tempfile.TemporaryDirectory() as tmp:
        ledger(Path(tmp) / "tenant")
        memory_bank(Path(tmp) / "bank")
        hypothesis_strategies(Path(tmp) / "drawn")
        canonical_dump(Path(tmp) / "value.json")
    print("ok")
