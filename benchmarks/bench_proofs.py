"""Benchmark: RFC 6962 compact-range appends (beside pymerkle) and proofs from a sidecar.

Measures, in one run:

1. appending N leaves (1,000,000 by default) to ``rfc6962.CompactRange`` (leaf hashing
   included and excluded) and, when the ``bench`` extra's ``pymerkle`` is importable, to
   ``pymerkle.InmemoryTree.append_entry`` over the same data; the two roots are compared.
2. writing the N leaf hashes to a ``treelog.TreeLog`` sidecar, then generating and verifying
   inclusion proofs for random leaves of the N-leaf tree read from that file (and consistency
   proofs from random older sizes), beside the same proofs from a reader that opens the file
   for every hash read (how ``TreeLog`` read before it kept its descriptor open).
3. a ledger of N entries: the first ``ledger.proofs.sync`` (the sidecar built from the whole
   ledger), an incremental sync, and ``prove_inclusion`` by memory id (sync under the ledger
   lock + finding the entry + O(log n) sidecar reads) for the newest and for random ids.

Usage::

    python benchmarks/bench_proofs.py                 # N = 1,000,000
    python benchmarks/bench_proofs.py --quick         # N = 20,000 (CI smoke)
    python benchmarks/bench_proofs.py --json out.json # also write the results as JSON

Importable by a combined runner: ``bench_append(n)``, ``bench_pymerkle(n)``,
``bench_sidecar_proofs(n, samples)``, ``bench_ledger_proofs(n, samples)``, ``run(n, samples)``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import prove_inclusion, sync
from merkle_memory.ledger.treelog import TreeLog
from merkle_memory.proof import (
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from merkle_memory.rfc6962 import CompactRange, hash_leaf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ledger import write_ledger

__all__ = [
    "bench_append",
    "bench_ledger_proofs",
    "bench_pymerkle",
    "bench_sidecar_proofs",
    "main",
    "run",
]


class _OpenPerRead(TreeLog):
    """The sidecar reader as it was: a stat and an open + pread + close for every hash."""

    __slots__ = ()

    def _read(self, position: int) -> bytes:
        len(self)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, 32, 32 * position)
        finally:
            os.close(fd)


def _data(n: int) -> list[bytes]:
    return [b"entry %d" % i for i in range(n)]


def bench_append(n: int) -> dict[str, Any]:
    """Time ``CompactRange.append`` of ``n`` leaves; returns seconds and µs per leaf."""
    data = _data(n)
    start = time.perf_counter()
    hashes = [hash_leaf(d) for d in data]
    hashed = time.perf_counter()
    compact = CompactRange()
    append = compact.append
    for h in hashes:
        append(h)
    root = compact.root()
    done = time.perf_counter()
    return {
        "leaves": n,
        "append_seconds": done - hashed,
        "append_us_per_leaf": (done - hashed) / n * 1e6,
        "hash_and_append_seconds": done - start,
        "root": root.hex(),
    }


def bench_pymerkle(n: int) -> dict[str, Any] | None:
    """Time ``pymerkle.InmemoryTree.append_entry`` of the same ``n`` leaves (None if absent)."""
    try:
        import pymerkle
    except ImportError:
        return None
    tree = pymerkle.InmemoryTree()
    start = time.perf_counter()
    for d in _data(n):
        tree.append_entry(d)
    appended = time.perf_counter()
    root = tree.get_root()
    done = time.perf_counter()
    return {
        "version": getattr(pymerkle, "__version__", "?"),
        "leaves": n,
        "append_seconds": appended - start,
        "append_us_per_leaf": (appended - start) / n * 1e6,
        "root_seconds": done - appended,
        "root": bytes(root).hex(),
    }


def bench_sidecar_proofs(n: int, samples: int = 1000) -> dict[str, Any]:
    """Write ``n`` leaves to a sidecar, then time proofs read from it and their verification."""
    rng = random.Random(6962)
    hashes = [hash_leaf(d) for d in _data(n)]
    with tempfile.TemporaryDirectory() as tmp:
        tree = TreeLog(Path(tmp) / "ledger.tree")
        start = time.perf_counter()
        tree.append(hashes)
        written = time.perf_counter() - start
        file_bytes = tree.path.stat().st_size
        root = tree.root(n)
        indices = [rng.randrange(n) for _ in range(samples)]
        old_reader = _OpenPerRead(tree.path)
        generate = generate_old = float("inf")
        for _ in range(2):  # alternating, best of two: the first pass warms the page cache
            start = time.perf_counter()
            proofs = [inclusion_proof(i, n, tree) for i in indices]
            generate = min(generate, time.perf_counter() - start)
            start = time.perf_counter()
            old_proofs = [inclusion_proof(i, n, old_reader) for i in indices]
            generate_old = min(generate_old, time.perf_counter() - start)
        assert old_proofs == proofs
        start = time.perf_counter()
        for i, p in zip(indices, proofs, strict=True):
            verify_inclusion(hashes[i], i, n, p, root)
        verify = time.perf_counter() - start
        olds = [rng.randrange(1, n) for _ in range(samples)]
        start = time.perf_counter()
        cons = [(m, consistency_proof(m, n, tree), tree.root(m)) for m in olds]
        cons_generate = time.perf_counter() - start
        start = time.perf_counter()
        for m, p, r in cons:
            verify_consistency(m, n, p, r, root)
        cons_verify = time.perf_counter() - start
    return {
        "leaves": n,
        "sidecar_write_seconds": written,
        "sidecar_bytes": file_bytes,
        "samples": samples,
        "mean_inclusion_proof_hashes": sum(map(len, proofs)) / samples,
        "inclusion_generate_us": generate / samples * 1e6,
        "inclusion_generate_open_per_read_us": generate_old / samples * 1e6,
        "open_per_read_over_cached_fd": generate_old / generate,
        "inclusion_verify_us": verify / samples * 1e6,
        "consistency_generate_us_incl_old_root": cons_generate / samples * 1e6,
        "consistency_verify_us": cons_verify / samples * 1e6,
    }


def bench_ledger_proofs(n: int, samples: int = 20) -> dict[str, Any]:
    """Proofs through ``ledger.proofs`` on an ``n``-entry ledger (sidecar built lazily)."""
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        write_ledger(path, n)
        start = time.perf_counter()
        state = sync(path)
        first_sync = time.perf_counter() - start
        assert state.leaves == n and state.broken_at is None
        Ledger(path).append("late", "ab" * 32)
        start = time.perf_counter()
        sync(path)
        incremental = time.perf_counter() - start
        start = time.perf_counter()
        newest = prove_inclusion(path, "late")
        prove_newest = time.perf_counter() - start
        verify_inclusion(
            newest.leaf_hash,
            newest.leaf_index,
            newest.tree_size,
            newest.inclusion_proof,
            newest.root_hash,
        )
        ids = [f"m{rng.randrange(n)}" for _ in range(samples)]
        start = time.perf_counter()
        for mid in ids:
            prove_inclusion(path, mid)
        prove_random = (time.perf_counter() - start) / samples
    return {
        "entries": n,
        "first_sync_seconds": first_sync,
        "first_sync_entries_per_s": n / first_sync,
        "incremental_sync_ms": incremental * 1e3,
        "prove_newest_ms": prove_newest * 1e3,
        "prove_random_id_ms": prove_random * 1e3,
    }


def run(n: int, samples: int = 1000) -> dict[str, Any]:
    """Run every benchmark at ``n`` leaves; the roots of both appenders must agree."""
    ours = bench_append(n)
    theirs = bench_pymerkle(n)
    if theirs is not None and theirs["root"] != ours["root"]:
        raise SystemExit("pymerkle and CompactRange disagree on the root")
    return {
        "compact_range": ours,
        "pymerkle": theirs,
        "sidecar_proofs": bench_sidecar_proofs(n, samples),
        "ledger_proofs": bench_ledger_proofs(n, max(10, samples // 50)),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints a summary and optionally writes JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 leaves, 200 samples")
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON")
    args = parser.parse_args(argv)
    n, samples = (20_000, 200) if args.quick else (args.leaves, 1000)
    result = run(n, samples)
    cr, pm, sc = result["compact_range"], result["pymerkle"], result["sidecar_proofs"]
    print(
        f"CompactRange: {n:,} appends in {cr['append_seconds']:.2f} s "
        f"({cr['append_us_per_leaf']:.2f} us/leaf; with leaf hashing "
        f"{cr['hash_and_append_seconds']:.2f} s)"
    )
    if pm is None:
        print("pymerkle: not installed (pip install '.[bench]')")
    else:
        print(
            f"pymerkle {pm['version']}: {n:,} append_entry in {pm['append_seconds']:.2f} s "
            f"({pm['append_us_per_leaf']:.2f} us/leaf), root in {pm['root_seconds']:.2f} s; "
            "same root"
        )
    print(
        f"sidecar: {sc['sidecar_bytes']:,} bytes written in {sc['sidecar_write_seconds']:.2f} s; "
        f"inclusion proof ({sc['mean_inclusion_proof_hashes']:.1f} hashes) "
        f"{sc['inclusion_generate_us']:.0f} us to generate, "
        f"{sc['inclusion_verify_us']:.0f} us to verify; consistency "
        f"{sc['consistency_generate_us_incl_old_root']:.0f} us / "
        f"{sc['consistency_verify_us']:.0f} us"
    )
    print(
        f"  (a reader opening the file per hash read: "
        f"{sc['inclusion_generate_open_per_read_us']:.0f} us per inclusion proof, "
        f"{sc['open_per_read_over_cached_fd']:.1f}x)"
    )
    lp = result["ledger_proofs"]
    print(
        f"ledger of {n:,}: first sync {lp['first_sync_seconds']:.2f} s "
        f"({lp['first_sync_entries_per_s']:,.0f} entries/s), incremental sync "
        f"{lp['incremental_sync_ms']:.2f} ms, prove newest {lp['prove_newest_ms']:.2f} ms, "
        f"prove a random id {lp['prove_random_id_ms']:.1f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
