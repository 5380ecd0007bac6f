"""Library invariants checked with the public Hypothesis strategies of merkle_memory.strategies."""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from merkle_memory import canonical, strategies
from merkle_memory.canonical import MAX_SAFE_INTEGER
from merkle_memory.errors import CanonicalizationError

FAST = settings(max_examples=100, deadline=None)
FEW = settings(max_examples=40, deadline=None)


def _depth(value: Any) -> int:
    """Naive nesting depth: 0 for a scalar, 1 + deepest child for a container."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _in_domain(value: Any) -> bool:
    """Naive reference for the canonical domain (DESIGN section 2)."""
    t = type(value)
    if value is None or t is bool:
        return True
    if t is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if t is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if t is str:
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if t is list or t is tuple:
        return all(_in_domain(v) for v in value)
    if t is dict:
        return all(type(k) is str and _in_domain(k) and _in_domain(v) for k, v in value.items())
    return False


# --- canonical JSON ------------------------------------------------------------------------


@FAST
@given(strategies.json_values(max_depth=3, tuples=True))
def test_json_values_round_trip(value: Any) -> None:
    """Every drawn value canonicalizes, and its canonical bytes parse back to the same bytes."""
    data = canonical.dumps(value)
    assert canonical.dumps(canonical.loads(data)) == data
    assert canonical.digest(value) == canonical.digest(canonical.loads(data))


@FAST
@given(strategies.json_values(floats=False))
def test_json_values_without_floats_round_trip_exactly(value: Any) -> None:
    """Without floats, loads(dumps(v)) gives back v itself (tuples aside)."""
    assert canonical.loads(canonical.dumps(value)) == value


@FAST
@given(
    st.integers(0, 4).flatmap(lambda d: st.tuples(st.just(d), strategies.json_values(max_depth=d)))
)
def test_json_values_respect_max_depth(pair: tuple[int, Any]) -> None:
    """No drawn value nests deeper than max_depth, and all lie in the domain (naive check)."""
    depth, value = pair
    assert _depth(value) <= depth
    assert _in_domain(value)


def test_json_values_rejects_negative_limits() -> None:
    """A negative max_depth or max_size is refused with ValueError."""
    with pytest.raises(ValueError):
        strategies.json_values(max_depth=-1)
    with pytest.raises(ValueError):
        strategies.json_values(max_size=-1)


@FAST
@given(strategies.out_of_domain_values())
def test_out_of_domain_values_raise_their_error(pair: tuple[Any, type[Exception]]) -> None:
    """dumps rejects every out-of-domain value with exactly the error class drawn with it."""
    value, error = pair
    assert issubclass(error, CanonicalizationError)
    assert not _in_domain(value)
    with pytest.raises(error):
        canonical.dumps(value)


@FAST
@given(strategies.json_values(max_depth=2))
def test_canonical_bytes_are_json_for_the_stdlib(value: Any) -> None:
    """Canonical bytes are plain JSON: the stdlib parser reads them to an equal value."""
    data = canonical.dumps(value)

    def big_as_float(text: str) -> int | float:
        number = int(text)
        return number if abs(number) <= MAX_SAFE_INTEGER else float(number)

    assert json.loads(data, parse_int=big_as_float) == canonical.loads(data)


# --- conversation DAG ----------------------------------------------------------------------


dag = importlib.import_module("merkle_memory.dag")


@FAST
@given(strategies.block_dicts())
def test_block_dicts_round_trip_through_content_block(block: dict[str, Any]) -> None:
    """Each drawn block builds a ContentBlock whose to_dict is the drawn dict plus is_error."""
    out = dag.ContentBlock.from_dict(block).to_dict()
    assert out == {"is_error": False, **block}


@FAST
@given(
    strategies.bucket_dicts().flatmap(
        lambda b: st.tuples(st.just(b), strategies.with_harness_noise(b))
    )
)
def test_node_hash_unchanged_under_harness_noise(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Harness noise (tags, signatures, zero tool args, metadata) never changes a node hash."""
    clean, noisy = (dag.Bucket.from_dict(b) for b in pair)
    for parent in (None, "ab" * 32):
        assert dag.node_hash(clean, parent) == dag.node_hash(noisy, parent)


# True == 1 in Python, but not in JSON: the two tool inputs below differ, and so do the hashes.
_TOOL_TRUE = {
    "type": "tool_use",
    "tool_use_id": "0",
    "tool_name": "Bash",
    "tool_input": {"_": True},
}
_TOOL_ONE = {**_TOOL_TRUE, "tool_input": {"_": 1}}


@FAST
@given(strategies.bucket_dicts(), strategies.bucket_dicts())
@example(
    {"type": "message", "role": "user", "content": [_TOOL_TRUE]},
    {"type": "message", "role": "user", "content": [_TOOL_ONE]},
)
def test_node_hash_commits_to_content_and_parent(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two buckets share a hash only when their projected content is equal as JSON (compared by
    its RFC 8785 bytes, so ``true`` is not ``1``); parents matter."""
    ba, bb = dag.Bucket.from_dict(a), dag.Bucket.from_dict(b)
    same = canonical.dumps(ba.hashed_content()) == canonical.dumps(bb.hashed_content())
    assert (dag.node_hash(ba, None) == dag.node_hash(bb, None)) == same
    assert dag.node_hash(ba, None) != dag.node_hash(ba, "00" * 32)


def test_with_harness_noise_does_not_mutate_input() -> None:
    """with_harness_noise leaves the bucket it was given unchanged."""
    bucket = {"type": "message", "role": "user", "content": [{"type": "text", "text": "hi"}]}
    before = json.dumps(bucket)

    @settings(max_examples=50, deadline=None)
    @given(strategies.with_harness_noise(bucket))
    def run(noisy: dict[str, Any]) -> None:
        assert json.dumps(bucket) == before

    run()


@FEW
@given(strategies.conversations())
def test_conversation_ids_survive_noise(conv: strategies.Conversation) -> None:
    """Every turn of a noisy conversation has the id of its clean form."""
    assert strategies.conversation_hashes(conv) == strategies.conversation_hashes(
        conv, recorded=True
    )


@FEW
@given(strategies.conversations(min_turns=2, max_turns=10, branch=0.5))
def test_conversation_dag_leaves_and_branches_match_naive(conv: strategies.Conversation) -> None:
    """Dag leaves and branch points equal a naive count over the distinct (parent, hash) pairs."""
    hashes = strategies.conversation_hashes(conv)
    children: dict[str, list[str]] = {h: [] for h in hashes}
    for turn, h in zip(conv.turns, hashes, strict=True):
        if turn.parent is not None and h not in children[hashes[turn.parent]]:
            children[hashes[turn.parent]].append(h)
    order = list(dict.fromkeys(hashes))
    graph = strategies.conversation_dag(conv)
    assert len(graph) == len(order)
    assert [n.hash for n in graph.leaves()] == [h for h in order if not children[h]]
    assert [n.hash for n in graph.branch_points()] == [h for h in order if len(children[h]) > 1]
    assert graph.root.hash == hashes[0]


def test_conversation_parents_precede_children() -> None:
    """Every drawn turn names an earlier parent; only turn 0 is a root; roles alternate."""

    @settings(max_examples=40, deadline=None)
    @given(strategies.conversations(min_turns=1, max_turns=12, noise=False))
    def run(conv: strategies.Conversation) -> None:
        assert conv.turns[0].parent is None
        for i, turn in enumerate(conv.turns[1:], start=1):
            assert turn.parent is not None and 0 <= turn.parent < i
            assert turn.bucket["role"] != conv.turns[turn.parent].bucket["role"]
            assert i in conv.children(turn.parent)
            assert turn.recorded is turn.bucket

    run()


# --- memories ------------------------------------------------------------------------------


memory = importlib.import_module("merkle_memory.bank.memory")


@FAST
@given(strategies.memory_fields(), st.randoms(use_true_random=False))
def test_memory_id_stable_under_tag_and_link_order(fields: dict[str, Any], rnd: Any) -> None:
    """Shuffling or duplicating tags and links never changes a memory's id."""
    tags, links = list(fields["tags"]), list(fields["links"])
    rnd.shuffle(tags)
    rnd.shuffle(links)
    a = memory.Memory(**fields)
    b = memory.Memory(**{**fields, "tags": tags + tags, "links": links})
    assert a.id == b.id
    assert a.id == canonical.digest(a.hashed_dict())


@FAST
@given(strategies.memories())
def test_memory_file_round_trip(m: Any) -> None:
    """A memory file's bytes are RFC 8785 plus a newline and read back to the same memory."""
    data = m.to_bytes()
    assert data.endswith(b"\n")
    assert canonical.dumps(canonical.loads(data[:-1])) == data[:-1]
    assert memory.Memory.from_dict(canonical.loads(data)) == m
    assert m.file_name.endswith(f"_{m.type}_{m.id}.json")


@FAST
@given(
    strategies.memory_fields(),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=3),
)
def test_memory_id_commits_to_content(fields: dict[str, Any], suffix: str) -> None:
    """Any change of content (even appended whitespace) gives another id (the suffix has no
    lone surrogate, which a memory's content may not hold)."""
    a = memory.Memory(**fields)
    b = memory.Memory(**{**fields, "content": fields["content"] + suffix})
    assert a.id != b.id


# --- packaging -----------------------------------------------------------------------------


def test_package_import_does_not_import_hypothesis() -> None:
    """Importing merkle_memory (and its CLI) never imports Hypothesis."""
    code = "import sys, merkle_memory, merkle_memory.cli; print('hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_clear_import_error_without_hypothesis() -> None:
    """Without Hypothesis, importing merkle_memory.strategies says to install the test extra."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["hypothesis"] = None  # makes `import hypothesis` raise ImportError
        try:
            import merkle_memory.strategies
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "merkle_memory[test]" in out.stdout


# --- ledgers -------------------------------------------------------------------------------


tenant_mod = importlib.import_module("merkle_memory.ledger.tenant")


@contextlib.contextmanager
def _materialize(scenario: strategies.LedgerScenario) -> Iterator[Any]:
    """Materialize a scenario in a fresh temporary folder, removed afterwards (Hypothesis
    runs many examples per test, so the test's own tmp_path cannot be reused)."""
    with tempfile.TemporaryDirectory(prefix="mm-ledger-") as tmp:
        yield strategies.materialize_ledger(scenario, tmp)


@FEW
@given(strategies.ledger_scenarios(tamper=False))
def test_honest_ledger_verifies(scenario: strategies.LedgerScenario) -> None:
    """An untampered tenant verifies ok: every saved record sealed, the others unsealed."""
    with _materialize(scenario) as tenant:
        report = tenant.verify()
    n = len(scenario.sealed)
    assert report.ok
    assert report.chain == ("intact" if n else "empty")
    assert (report.entries, report.sealed) == (n, n)
    assert list(report.unsealed) == sorted(r["id"] for r in scenario.unsealed)
    assert report.altered == report.missing == report.disputed == ()


@FEW
@given(strategies.ledger_scenarios(tamper=True, max_records=5))
def test_tampered_ledger_names_the_tampered_record(scenario: strategies.LedgerScenario) -> None:
    """Each kind of tamper gives exactly the verdict DESIGN section 4 prescribes (naive model)."""
    with _materialize(scenario) as tenant:
        _check_tamper_verdict(scenario, tenant)


def _check_tamper_verdict(scenario: strategies.LedgerScenario, tenant: Any) -> None:
    """Naive model of the verdict of each tamper kind (DESIGN section 4)."""
    report = tenant.verify()
    tamper = scenario.tamper
    assert tamper is not None
    ids = scenario.sealed_ids
    n, k = len(ids), tamper.target
    if tamper.kind == "refile-record":
        assert report.ok and report.sealed == n
    elif tamper.kind == "alter-record":
        assert not report.ok and report.chain == "intact"
        assert list(report.altered) == [ids[k]] and report.sealed == n - 1
    elif tamper.kind == "delete-record":
        assert not report.ok and report.chain == "intact"
        assert list(report.missing) == [ids[k]] and report.sealed == n - 1
    elif tamper.kind == "edit-line":
        assert not report.ok and report.chain == "broken"
        assert (report.broken_at, report.reason) == (
            k + 1,
            "entry hash does not match its contents",
        )
        assert report.sealed == k and list(report.disputed) == sorted(ids[k:])
    elif tamper.kind == "truncate":
        kept = n - (k + 1)
        assert not report.ok and report.chain == "broken"
        assert (report.broken_at, report.entries) == (kept + 1, kept)
        assert "ledger.head records a later entry" in (report.reason or "")
        assert set(ids[kept:]) <= set(report.unsealed)
    else:
        assert tamper.kind == "torn-tail"
        data = tenant.ledger.path.read_bytes()
        fragment = data.rsplit(b"\n", 1)[1]
        assert (report.chain, report.entries, report.broken_at, report.ok) == (
            "intact",
            n,
            None,
            True,
        )
        assert report.torn_tail == (len(data) - len(fragment), len(fragment))
        tenant.ledger.recover()  # what the next append does first
        after = tenant.verify()
        assert after.ok and (after.chain, after.entries, after.sealed) == ("intact", n, n)
        torn = (tenant.root / "ledger.torn").read_bytes()
        assert torn.endswith(b"\n" + fragment + b"\n")
        assert torn.startswith(b"# quarantined ")


def test_tamper_kinds_are_all_drawn() -> None:
    """ledger_scenarios(tamper=True) reaches every kind of tamper. The draw is derandomized,
    so the check is deterministic: it never depends on a lucky seed."""
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, database=None, derandomize=True)
    @given(strategies.ledger_scenarios(tamper=True))
    def run(scenario: strategies.LedgerScenario) -> None:
        assert scenario.tamper is not None and scenario.sealed
        seen.add(scenario.tamper.kind)

    run()
    assert seen == set(strategies.TAMPER_KINDS)
