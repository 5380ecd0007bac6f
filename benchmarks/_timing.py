"""The one way every benchmark in ``benchmarks/`` times things (issue 15, item 5).

Why interleave: on a shared machine the speed of ``fsync`` and of the CPU drifts by several
times within minutes, so "run A for a minute, then B for a minute" compares two different
machines. :func:`interleave` instead runs every implementation in short chunks (``chunk``
calls), one chunk each per *round*, for ``rounds`` rounds, all in this process; the starting
implementation rotates every round so none always runs right after the same neighbour. Each
chunk gives one sample (seconds per call).

Why paired ratios: :func:`ratio` divides the library's sample of round *i* by the baseline's
sample of the same round (taken seconds apart), then reports the median and the spread
(min, max, quartiles) of those per-round ratios. Every ratio has one direction:
**library time / baseline time, lower is better** (1.0 = as fast as the floor or peer).

Inputs: :func:`real_inputs` is ``../shared/real_inputs`` (or ``$MERKLE_MEMORY_SHARED/
real_inputs``); :func:`input_source` records whether a benchmark used it and says so loudly on
stderr when it falls back to synthetic data (``synthetic_fallback: true`` in the JSON).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "Clock",
    "Interleaved",
    "calibrate",
    "input_source",
    "interleave",
    "ratio",
    "real_inputs",
    "repeat",
    "spread",
]

Clock = Callable[[], float]

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Interleaved:
    """What :func:`interleave` measured.

    Attributes:
        order: implementation names in the order their chunks ran (one per chunk).
        samples: per implementation, seconds per call of each of its chunks (one per round).
    """

    order: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)

    def per_call(self, name: str) -> dict[str, float | int]:
        """Median and spread of ``name``'s seconds per call."""
        return spread(self.samples[name])


def rotation(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of the chunks of each round: round ``r`` starts at ``names[r % len]``."""
    out = []
    for r in range(rounds):
        k = r % len(names) if names else 0
        out.append(list(names[k:]) + list(names[:k]))
    return out


def interleave(
    impls: Mapping[str, Callable[[], object]],
    *,
    chunk: int | Mapping[str, int],
    rounds: int,
    warmup: int = 1,
    clock: Clock = time.perf_counter,
) -> Interleaved:
    """Time every implementation in alternating chunks of ``chunk`` calls, ``rounds`` times.

    Args:
        impls: name -> a callable doing one unit of work (its result is dropped).
        chunk: calls per chunk, for all or per name.
        rounds: chunks per implementation (the number of samples, and of paired ratios).
        warmup: untimed calls of each implementation before the first round.
        clock: the timer (injected by tests).
    """
    result = Interleaved(samples={name: [] for name in impls})
    for func in impls.values():
        for _ in range(warmup):
            func()
    for names in rotation(list(impls), rounds):
        for name in names:
            func = impls[name]
            calls = chunk if isinstance(chunk, int) else chunk[name]
            began = clock()
            for _ in range(calls):
                func()
            result.samples[name].append((clock() - began) / calls)
            result.order.append(name)
    return result


def repeat(
    func: Callable[[], object], rounds: int, clock: Clock = time.perf_counter
) -> list[float]:
    """Seconds of each of ``rounds`` calls of ``func`` (for figures with no baseline)."""
    out = []
    for _ in range(rounds):
        began = clock()
        func()
        out.append(clock() - began)
    return out


def calibrate(
    func: Callable[[], object], target: float, clock: Clock = time.perf_counter, most: int = 10**6
) -> int:
    """Calls of ``func`` that take about ``target`` seconds (at least 1, at most ``most``)."""
    func()  # warm
    began = clock()
    func()
    once = max(clock() - began, 1e-9)
    return max(1, min(most, int(target / once)))


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def spread(values: Sequence[float]) -> dict[str, float | int]:
    """``{"median", "min", "max", "q1", "q3", "n"}`` of ``values`` (4 significant digits)."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    if len(ordered) > 1:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {
        "median": _round(statistics.median(ordered)),
        "min": _round(ordered[0]),
        "max": _round(ordered[-1]),
        "q1": _round(q1),
        "q3": _round(q3),
        "n": len(ordered),
    }


def ratio(
    library: str, baseline: str, lib: Sequence[float], base: Sequence[float]
) -> dict[str, Any]:
    """Paired per-round ratios ``lib[i] / base[i]``: library time over baseline time.

    Returns:
        ``{"ratio": "<library> / <baseline>", "library", "baseline", "median", "min", "max",
        "q1", "q3", "n"}``; lower is better, 1.0 means as fast as the baseline.
    """
    if len(lib) != len(base):
        raise ValueError(f"unpaired samples: {len(lib)} vs {len(base)}")
    pairs = [a / b for a, b in zip(lib, base, strict=True) if b > 0]
    return {"ratio": f"{library} / {baseline}", "library": library, "baseline": baseline} | (
        spread(pairs)
    )


def real_inputs() -> Path:
    """The folder of real third-party inputs: ``../shared/real_inputs`` beside the checkout
    (``$MERKLE_MEMORY_SHARED/real_inputs`` when that is set)."""
    shared = Path(os.environ.get("MERKLE_MEMORY_SHARED", REPO.parent / "shared"))
    return shared / "real_inputs"


def input_source(
    bench: str, real: bool, detail: str, stream: IO[str] | None = None
) -> dict[str, Any]:
    """Record where a benchmark's inputs came from; say it loudly on stderr when synthetic.

    Returns:
        ``{"source": "real" | "synthetic", "synthetic_fallback": bool, "detail": str}``.
    """
    if not real:
        print(
            f"!!! {bench}: SYNTHETIC INPUT: {detail} (real inputs not found in {real_inputs()})",
            file=stream or sys.stderr,
        )
    return {
        "source": "real" if real else "synthetic",
        "synthetic_fallback": not real,
        "detail": detail,
    }
