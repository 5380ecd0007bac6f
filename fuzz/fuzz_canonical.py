"""atheris target: ``canonical.loads`` on any bytes must round-trip or raise a library error."""

from __future__ import annotations

import atheris

with atheris.instrument_imports():
    from merkle_memory import canonical

from _common import run


def target(data: bytes) -> None:
    """Parse, then check ``dumps(loads(dumps(x))) == dumps(x)``."""
    value = canonical.loads(data)
    out = canonical.dumps(value)
    if canonical.dumps(canonical.loads(out)) != out:
        raise AssertionError("canonical bytes do not round-trip")


if __name__ == "__main__":
    run(target)
