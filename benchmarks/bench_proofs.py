"""Benchmark: RFC 6962 compact-range appends (beside pymerkle) and proofs from a sidecar.

Measures, in one run:

1. appending N leaves (1,000,000 by default) to ``rfc6962.CompactRange`` and, when the
   ``bench`` extra's ``pymerkle`` is importable, to ``pymerkle.InmemoryTree.append_entry``
   over the same data, interleaved in chunks of leaves; leaf hashing is included on both sides
   (``hash_leaf`` + ``append`` against ``append_entry``, which hashes its leaf); the two roots
   are compared.
2. writing the N leaf hashes to a ``treelog.TreeLog`` sidecar, then generating and verifying
   inclusion proofs for random leaves of the N-leaf tree read from that file (and consistency
   proofs from random older sizes), beside the same proofs from a reader that opens the file
   for every hash read (how ``TreeLog`` read before it kept its descriptor open), interleaved.
3. a ledger of N entries: the first ``ledger.proofs.sync`` (the sidecar built from the whole
   ledger), an incremental sync, and ``prove_inclusion`` by memory id (sync under the ledger
   lock + finding the entry + O(log n) sidecar reads) for the newest and for random ids.

Usage::

    python benchmarks/bench_proofs.py                 # N = 1,000,000
    python benchmarks/bench_proofs.py --quick         # N = 20,000 (CI smoke)
    python benchmarks/bench_proofs.py --json out.json # also write the results as JSON

Importable by a combined runner: ``bench_tree(n, chunk)``,
``bench_sidecar_proofs(n, samples)``, ``bench_ledger_proofs(n, samples)``, ``run(n, samples)``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
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
from _timing import Clock, interleave, ratio, spread
from bench_ledger import write_ledger

__all__ = [
    "bench_ledger_proofs",
    "bench_sidecar_proofs",
    "bench_tree",
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


def _pymerkle() -> Any:
    try:
        import pymerkle  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return None
    return pymerkle


def bench_tree(n: int, chunk: int = 1000, clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Append ``n`` leaves to ``CompactRange`` and, when installed, to pymerkle's
    ``InmemoryTree``, interleaved in chunks of ``chunk`` leaves (both trees grow together).

    Like with like: one call is one leaf *with its hashing* on both sides
    (``hash_leaf`` + ``CompactRange.append``; ``append_entry`` hashes the leaf itself). The
    roots are computed once at the end (timed apart) and must agree.
    """
    data = _data(n)
    compact = CompactRange()
    ours_next = iter(data).__next__
    append, leaf = compact.append, hash_leaf

    def ours() -> None:
        append(leaf(ours_next()))

    impls: dict[str, Callable[[], object]] = {"CompactRange": ours}
    pymerkle = _pymerkle()
    tree = None
    if pymerkle is not None:
        tree = pymerkle.InmemoryTree()
        theirs_next = iter(data).__next__
        append_entry = tree.append_entry

        def theirs() -> None:
            append_entry(theirs_next())

        impls["pymerkle"] = theirs
    rounds = max(1, n // chunk)
    measured = interleave(impls, chunk=chunk, rounds=rounds, warmup=0, clock=clock)
    began = clock()
    root = compact.root()
    out: dict[str, Any] = {
        "leaves": rounds * chunk,
        "chunk": chunk,
        "compact_range_us_per_leaf": spread([x * 1e6 for x in measured.samples["CompactRange"]]),
        "compact_range_root_seconds": round(clock() - began, 6),
        "pymerkle": "not installed",
        "ratios": [],
    }
    if tree is not None:
        began = clock()
        theirs_root = bytes(tree.get_root())
        out["pymerkle_root_seconds"] = round(clock() - began, 6)
        if theirs_root != root:
            raise AssertionError("pymerkle and CompactRange disagree on the root")
        out["pymerkle"] = getattr(pymerkle, "__version__", "?")
        out["pymerkle_us_per_leaf"] = spread([x * 1e6 for x in measured.samples["pymerkle"]])
        out["ratios"].append(
            ratio(
                "CompactRange hash_leaf+append",
                "pymerkle append_entry",
                measured.samples["CompactRange"],
                measured.samples["pymerkle"],
            )
        )
    return out


def bench_sidecar_proofs(
    n: int, samples: int = 1000, clock: Clock = time.perf_counter
) -> dict[str, Any]:
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
        proofs = [inclusion_proof(i, n, tree) for i in indices]
        assert [inclusion_proof(i, n, old_reader) for i in indices[:20]] == proofs[:20]
        new_next = itertools.cycle(indices).__next__
        old_next = itertools.cycle(indices).__next__
        measured = interleave(
            {
                "TreeLog": lambda: inclusion_proof(new_next(), n, tree),
                "open per read": lambda: inclusion_proof(old_next(), n, old_reader),
            },
            chunk=20,
            rounds=max(1, samples // 20),
            clock=clock,
        )
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
        "inclusion_generate_us": spread([x * 1e6 for x in measured.samples["TreeLog"]]),
        "inclusion_generate_open_per_read_us": spread(
            [x * 1e6 for x in measured.samples["open per read"]]
        ),
        "inclusion_verify_us": verify / samples * 1e6,
        "consistency_generate_us_incl_old_root": cons_generate / samples * 1e6,
        "consistency_verify_us": cons_verify / samples * 1e6,
        "ratios": [
            ratio(
                "TreeLog inclusion proof",
                "open-per-read reader",
                measured.samples["TreeLog"],
                measured.samples["open per read"],
            )
        ],
    }


def _warm(*paths: Path) -> None:
    """Read files once so that timings measure the code, not the first read from disk."""
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(1 << 24):
                pass


def bench_ledger_proofs(
    n: int, samples: int = 20, rounds: int = 30, clock: Clock = time.perf_counter
) -> dict[str, Any]:
    """Proofs through ``ledger.proofs`` on an ``n``-entry ledger (sidecar and id index built
    by the first sync), then proof by id (issue 15 item 3: O(log n), the id index) of random
    ids interleaved, in chunks of ``samples`` ids, with the floor: the inclusion proof of the
    same entries' known leaf indexes read from the sidecar and verified (no lookup, no
    sync, no check against the ledger). The files are read once before timing (page cache
    warm: the figure is the work, not the disk)."""
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        write_ledger(path, n)
        start = time.perf_counter()
        state = sync(path)
        first_sync = time.perf_counter() - start
        assert state.leaves == n and state.broken_at is None and state.ids is not None
        ledger = Ledger(path)
        ledger.append("late", "ab" * 32)
        start = time.perf_counter()
        sync(ledger)
        incremental = time.perf_counter() - start
        start = time.perf_counter()
        newest = prove_inclusion(ledger, "late")
        prove_newest = time.perf_counter() - start
        verify_inclusion(
            newest.leaf_hash,
            newest.leaf_index,
            newest.tree_size,
            newest.inclusion_proof,
            newest.root_hash,
        )
        size = n + 1
        _warm(path, path.with_name("ledger.tree"), path.with_name("ledger.ids"))
        chosen = [rng.randrange(n) for _ in range(samples * rounds)]
        ids, floors = itertools.cycle(chosen), itertools.cycle(chosen)
        tree = TreeLog(path.with_name("ledger.tree"))
        root = tree.root(size)

        def prove_by_id() -> None:
            k = next(ids)
            proof = prove_inclusion(ledger, f"m{k}")
            assert proof.leaf_index == k

        def floor() -> None:
            k = next(floors)
            audit = inclusion_proof(k, size, tree)
            verify_inclusion(tree[k], k, size, audit, root)

        measured = interleave(
            {"prove_inclusion by id": prove_by_id, "sidecar proof of a known index": floor},
            chunk=samples,
            rounds=rounds,
            warmup=0,
            clock=clock,
        )
        tree.close()
    s = measured.samples
    return {
        "entries": n,
        "first_sync_seconds": first_sync,
        "first_sync_entries_per_s": n / first_sync,
        "incremental_sync_ms": incremental * 1e3,
        "prove_newest_ms": prove_newest * 1e3,
        "prove_random_id_ms": spread([x * 1e3 for x in s["prove_inclusion by id"]]),
        "floor_known_index_ms": spread([x * 1e3 for x in s["sidecar proof of a known index"]]),
        "ratios": [
            ratio(
                "prove_inclusion by id",
                "sidecar proof of a known index",
                s["prove_inclusion by id"],
                s["sidecar proof of a known index"],
            )
        ],
    }


def run(n: int, samples: int = 1000) -> dict[str, Any]:
    """Run every benchmark at ``n`` leaves; the roots of both appenders must agree."""
    return {
        "tree_append": bench_tree(n, chunk=1000 if n < 200_000 else 10_000),
        "sidecar_proofs": bench_sidecar_proofs(n, samples),
        "ledger_proofs": bench_ledger_proofs(n, 20, rounds=30 if n >= 200_000 else 15),
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
    tr, sc, lp = result["tree_append"], result["sidecar_proofs"], result["ledger_proofs"]
    print(
        f"CompactRange: {tr['leaves']:,} leaves, hash_leaf + append "
        f"{tr['compact_range_us_per_leaf']['median']:.2f} us/leaf; pymerkle: {tr['pymerkle']}"
    )
    print(
        f"sidecar: {sc['sidecar_bytes']:,} bytes written in {sc['sidecar_write_seconds']:.2f} s; "
        f"inclusion proof ({sc['mean_inclusion_proof_hashes']:.1f} hashes) "
        f"{sc['inclusion_generate_us']['median']:.0f} us to generate, "
        f"{sc['inclusion_verify_us']:.0f} us to verify; consistency "
        f"{sc['consistency_generate_us_incl_old_root']:.0f} us / "
        f"{sc['consistency_verify_us']:.0f} us"
    )
    print(
        f"ledger of {n:,}: first sync {lp['first_sync_seconds']:.2f} s "
        f"({lp['first_sync_entries_per_s']:,.0f} entries/s), incremental sync "
        f"{lp['incremental_sync_ms']:.2f} ms, prove newest {lp['prove_newest_ms']:.2f} ms, "
        f"prove a random id {lp['prove_random_id_ms']['median']:.3f} ms (median; goal < 1 ms)"
    )
    for part in (tr, sc, lp):
        for r in part["ratios"]:
            print(
                f"{r['ratio']}: {r['median']:.3f}x "
                f"(min {r['min']:.3f} max {r['max']:.3f}, {r['n']} rounds)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
