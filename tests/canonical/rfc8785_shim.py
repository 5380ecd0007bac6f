"""The API of the ``rfc8785`` package (Trail of Bits, v0.1.4) over ``merkle_memory.canonical``.

A test helper, not a test module. :func:`build` returns two module objects, ``rfc8785`` and
``rfc8785._impl``, holding what rfc8785's own test suite calls (``dumps``, ``dump``, the three
error classes, ``__version__``, and the internals ``_serialize_float``, ``_INT_MAX``,
``_INT_MIN``), each mapped to ``canonical``. ``tests/canonical/test_rfc8785_suite.py`` runs
the behaviours of that suite through it, over the vectors in ``tests/assets``.

Run rfc8785's own test files against ``canonical`` (they are not copied into this
repository)::

    pip download rfc8785==0.1.4 --no-binary :all: --no-deps -d DIR
    tar xzf DIR/rfc8785-0.1.4.tar.gz -C DIR
    python tests/canonical/rfc8785_shim.py DIR/rfc8785-0.1.4/test

which puts the shim in ``sys.modules`` under rfc8785's names and runs pytest on that folder.
The one expected failure is ``test_dumps_enum_multiple_inheritance``: rfc8785 accepts a
``dict`` subclass (``class Y(dict, Enum)``), ``canonical`` refuses subclasses of containers
(docs/DECISIONS.md, "Canonical JSON: the domain at the edges").
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import IO

import merkle_memory
from merkle_memory import canonical
from merkle_memory.errors import CanonicalizationError, FloatDomainError, IntegerDomainError

_NAMES = ("CanonicalizationError", "FloatDomainError", "IntegerDomainError", "dump", "dumps")


def _serialize_float(value: float, sink: IO[bytes]) -> None:
    """rfc8785's internal float writer: the ES6 form of ``value`` into ``sink``."""
    sink.write(canonical.format_number(value).encode("ascii"))


def build() -> tuple[ModuleType, ModuleType]:
    """Fresh ``rfc8785`` and ``rfc8785._impl`` module objects backed by ``canonical``."""
    impl = ModuleType("rfc8785._impl")
    package = ModuleType("rfc8785")
    package.__path__ = []  # a package, so ``import rfc8785._impl`` resolves
    for module in (impl, package):
        module.__dict__.update(
            CanonicalizationError=CanonicalizationError,
            FloatDomainError=FloatDomainError,
            IntegerDomainError=IntegerDomainError,
            dump=canonical.dump,
            dumps=canonical.dumps,
        )
    impl.__dict__.update(
        _serialize_float=_serialize_float,
        _INT_MAX=canonical.MAX_SAFE_INTEGER,
        _INT_MIN=-canonical.MAX_SAFE_INTEGER,
    )
    package.__dict__.update(__version__=merkle_memory.__version__, __all__=list(_NAMES))
    package._impl = impl  # type: ignore[attr-defined]
    return package, impl


def run_upstream(test_dir: str) -> int:
    """Run rfc8785's own test folder ``test_dir`` with the shim in place of rfc8785."""
    import pytest

    package, impl = build()
    sys.modules["rfc8785"] = package
    sys.modules["rfc8785._impl"] = impl
    return int(pytest.main(["-q", "-p", "no:cacheprovider", test_dir]))


if __name__ == "__main__":
    sys.exit(run_upstream(sys.argv[1]))
