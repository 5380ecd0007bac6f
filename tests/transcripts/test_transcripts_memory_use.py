"""Importing streams: memory grows with the DAG, not with the file (issue 6 item 5).

Peak Python heap is measured with ``tracemalloc`` on small synthetic transcripts from
``benchmarks/gen_transcript.py`` (the full-size figures are in ``docs/PERFORMANCE.md``).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import canonical
from merkle_memory.transcripts import import_file
from merkle_memory.transcripts._common import RawMessage, build_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_transcript import iter_lines

TURNS = 800


def _write(path: Path, pad: int = 0) -> Path:
    """The synthetic transcript; ``pad`` bytes of a field the importer does not keep are
    added to every line (as Claude Code's ``toolUseResult`` and snapshots do)."""
    with open(path, "w", encoding="utf-8") as handle:
        for i, record in enumerate(iter_lines(TURNS, seed=7)):
            if pad:
                record["toolUseResult"] = {"stdout": f"{i:08d}" + "x" * pad}
            handle.write(json.dumps(record) + "\n")
    return path


def _heap(func: Callable[[], Any]) -> tuple[Any, int, int]:
    """(result, peak bytes while running, bytes still held by the result after it)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = func()
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - base, held - base


def test_peak_is_close_to_the_dag_itself(tmp_path: Path) -> None:
    """The peak heap of an import is at most 1.3x what its nodes hold afterwards: parsed
    lines, records and canonical bytes are released as nodes are built (the importer used to
    peak at over 2x)."""
    path = _write(tmp_path / "s.jsonl")
    result, peak, held = _heap(lambda: import_file(path, "claude-code"))
    assert len(result.nodes) == TURNS
    assert held > 0 and peak <= 1.3 * held, (peak, held)


def test_bytes_not_kept_cost_no_memory(tmp_path: Path) -> None:
    """Ten times the file size in fields that are not kept: the same nodes, and the peak heap
    grows by less than 10% (it grows with the DAG, not with the file)."""
    plain = _write(tmp_path / "plain.jsonl")
    padded = _write(tmp_path / "padded.jsonl", pad=6000)
    assert padded.stat().st_size > 10 * plain.stat().st_size
    small, small_peak, _ = _heap(lambda: import_file(plain, "claude-code"))
    large, large_peak, _ = _heap(lambda: import_file(padded, "claude-code"))
    assert [n.hash for n in large.nodes] == [n.hash for n in small.nodes]
    assert large_peak < 1.1 * small_peak, (large_peak, small_peak)


def test_build_nodes_consumes_an_iterator_and_releases_records() -> None:
    """build_nodes takes a generator, and a key repeated with other content keeps only a
    digest of its first record: the records' buckets are referenced by the nodes alone."""
    from merkle_memory.dag import Bucket, ContentBlock

    def records() -> Any:
        parent = None
        for i in range(200):
            bucket = Bucket("message", "user", (ContentBlock("text", text=f"turn {i}"),))
            yield RawMessage(f"k{i}", parent, bucket, {"i": i})
            parent = f"k{i}"

    built = build_nodes(records())
    assert len(built.nodes) == 200
    assert [n.metadata["i"] for n in built.nodes] == list(range(200))
    # every node's id is the canonical digest of its preimage (naive reference)
    for node in built.nodes[:5]:
        preimage = {"parent": node.parent_hash or "", "content": node.bucket.hashed_content()}
        assert node.hash == canonical.digest(preimage)


@pytest.mark.parametrize("turns", [1, 40])
def test_synthetic_transcript_hashes_match_naive_reference(tmp_path: Path, turns: int) -> None:
    """Every node of a synthetic transcript has the hash the plain formula gives
    (``canonical.digest`` of the preimage dict), parents included."""
    path = tmp_path / "s.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for record in iter_lines(turns, seed=3):
            handle.write(json.dumps(record) + "\n")
    result = import_file(path, "claude-code")
    known = {None}
    for node in result.nodes:
        assert node.parent_hash in known
        preimage = {"parent": node.parent_hash or "", "content": node.bucket.hashed_content()}
        assert node.hash == canonical.digest(preimage)
        known.add(node.hash)
