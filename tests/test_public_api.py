"""The public surface: every public module's ``__all__`` names exist, are documented, and leak
no private name; the package exports the everyday surface and stays stdlib-only on import."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import merkle_memory

PUBLIC_MODULES = (
    "merkle_memory",
    "merkle_memory.bank",
    "merkle_memory.canonical",
    "merkle_memory.checkpoint",
    "merkle_memory.dag",
    "merkle_memory.errors",
    "merkle_memory.ledger",
    "merkle_memory.ledger.proofs",
    "merkle_memory.bank.memory",
    "merkle_memory.dag.store",
    "merkle_memory.projection",
    "merkle_memory.proof",
    "merkle_memory.ledger.records",
    "merkle_memory.ledger.recovery",
    "merkle_memory.ledger.storage",
    "merkle_memory.rfc6962",
    "merkle_memory.signed_note",
    "merkle_memory.ledger.tenant",
    "merkle_memory.transcripts",
    "merkle_memory.ledger.treelog",
    "merkle_memory.cli",
)


def _public_items() -> list[tuple[str, str, object]]:
    items = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            items.append((module_name, name, getattr(module, name)))
    return items


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_has_docstring_and_sorted_public_names(module_name: str) -> None:
    """Each public module has a docstring and an ``__all__`` without private names."""
    module = importlib.import_module(module_name)
    assert (module.__doc__ or "").strip(), module_name
    assert module.__all__, module_name
    private = [n for n in module.__all__ if n.startswith("_") and n != "__version__"]
    assert private == []
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


def test_every_public_callable_and_class_is_documented() -> None:
    """Every function and class named in a public ``__all__`` has its own docstring, and so
    does every public method of those classes."""
    undocumented: list[str] = []
    for module_name, name, obj in _public_items():
        if inspect.ismodule(obj):
            continue
        documentable = inspect.isclass(obj) or inspect.isfunction(obj)
        if documentable and not (obj.__doc__ or "").strip():
            undocumented.append(f"{module_name}.{name}")
        if inspect.isclass(obj) and obj.__module__.startswith("merkle_memory"):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                func = member.fget if isinstance(member, property) else member
                if isinstance(func, (staticmethod, classmethod)):
                    func = func.__func__
                if inspect.isfunction(func) and not (func.__doc__ or "").strip():
                    undocumented.append(f"{module_name}.{name}.{attr}")
    assert undocumented == []


def test_package_exports_the_everyday_surface() -> None:
    """The names a user reaches for first are importable from the package itself."""
    for name in (
        "dumps",
        "loads",
        "digest",
        "ContentBlock",
        "Bucket",
        "Node",
        "node_hash",
        "project_content",
        "HARNESS_TAGS",
        "import_file",
        "Ledger",
        "verify_ledger",
        "Tenant",
        "Memory",
        "MemoryBank",
        "hash_leaf",
        "verify_inclusion",
        "verify_consistency",
        "prove_inclusion",
        "MerkleMemoryError",
    ):
        assert name in merkle_memory.__all__, name
    assert isinstance(merkle_memory.__version__, str) and merkle_memory.__version__.count(".") == 2


def test_import_loads_only_the_standard_library() -> None:
    """``import merkle_memory`` (and the CLI) pull in no third-party module: stdlib only."""
    code = (
        "import sys; before = set(sys.modules); import merkle_memory, merkle_memory.cli; "
        "new = set(sys.modules) - before; "
        "roots = sorted({m.split('.')[0] for m in new} - {'merkle_memory'}); "
        "std = sys.stdlib_module_names | {'_distutils_hack'}; "
        "third = [r for r in roots if r not in std]; "
        "print(','.join(third))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
