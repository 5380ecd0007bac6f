"""errors: the one exception hierarchy, pinned class by class."""

from __future__ import annotations

import inspect

import pytest

import merkle_memory
from merkle_memory import errors

# Every class of errors.py and its direct bases, in order (DESIGN section 1).
HIERARCHY: dict[str, tuple[str, ...]] = {
    "MerkleMemoryError": ("Exception",),
    "CanonicalizationError": ("MerkleMemoryError", "ValueError"),
    "IntegerDomainError": ("CanonicalizationError",),
    "FloatDomainError": ("CanonicalizationError",),
    "SurrogateError": ("CanonicalizationError",),
    "DuplicateKeyError": ("CanonicalizationError",),
    "NestingDepthError": ("CanonicalizationError",),
    "UnsupportedTypeError": ("CanonicalizationError", "TypeError"),
    "EncodingError": ("CanonicalizationError",),
    "JSONSyntaxError": ("CanonicalizationError",),
    "ProofError": ("MerkleMemoryError", "ValueError"),
    "RootMismatchError": ("ProofError",),
    "ProofLengthError": ("ProofError",),
    "HashLengthError": ("ProofError",),
    "IndexOutOfRangeError": ("ProofError",),
    "CheckpointError": ("ProofError",),
    "TileError": ("ProofError",),
    "TileNotFoundError": ("TileError", "LookupError"),
    "LedgerError": ("MerkleMemoryError",),
    "LedgerBrokenError": ("LedgerError",),
    "LedgerRollbackError": ("LedgerError",),
    "LedgerFormatError": ("LedgerError", "ValueError"),
    "RecordError": ("LedgerError", "ValueError"),
    "TreeLogError": ("LedgerError",),
    "StoreFileError": ("LedgerError",),
    "TenantError": ("LedgerError",),
    "TranscriptFormatError": ("MerkleMemoryError", "ValueError"),
    "DagError": ("MerkleMemoryError", "ValueError"),
    "ContentBlockError": ("DagError",),
    "NodeFormatError": ("DagError",),
    "NodeStoreError": ("MerkleMemoryError",),
    "NodeNotFoundError": ("NodeStoreError", "LookupError"),
    "DatabaseError": ("MerkleMemoryError",),
    "BankError": ("MerkleMemoryError",),
    "MemoryFormatError": ("BankError", "ValueError"),
    "MemoryNotFoundError": ("BankError", "LookupError"),
    "TamperedMemoryError": ("BankError",),
    "WitnessError": ("MerkleMemoryError",),
}


def _classes() -> dict[str, type[BaseException]]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    }


def test_hierarchy_is_pinned() -> None:
    """errors.py holds exactly the pinned classes, each with exactly the pinned direct bases
    (adding a class means adding it here too)."""
    classes = _classes()
    assert set(classes) == set(HIERARCHY)
    assert set(errors.__all__) == set(HIERARCHY)
    for name, bases in HIERARCHY.items():
        assert tuple(base.__name__ for base in classes[name].__bases__) == bases, name


def test_every_class_is_under_the_base_and_exported() -> None:
    """Every class in errors.py (added ones too) derives from MerkleMemoryError, is listed in
    errors.__all__, and is importable from merkle_memory as the same object; the package's
    ``__all__`` (the everyday surface) lists exactly the base of each family."""
    for name, cls in _classes().items():
        assert issubclass(cls, errors.MerkleMemoryError), name
        assert name in errors.__all__, name
        assert getattr(merkle_memory, name) is cls, name
        assert cls.__doc__, name
    families = {
        name for name, bases in HIERARCHY.items() if bases[0] in ("Exception", "MerkleMemoryError")
    }
    assert families == {
        "MerkleMemoryError", "CanonicalizationError", "ProofError", "LedgerError",
        "TranscriptFormatError", "DagError", "NodeStoreError", "DatabaseError", "BankError",
        "WitnessError",
    }  # fmt: skip
    listed = {name for name in merkle_memory.__all__ if name in HIERARCHY}
    assert listed == families


def test_design_names_exist() -> None:
    """The classes DESIGN section 1 names (a MUST) are all present."""
    for name in (
        "MerkleMemoryError", "CanonicalizationError", "IntegerDomainError", "FloatDomainError",
        "SurrogateError", "DuplicateKeyError", "NestingDepthError", "UnsupportedTypeError",
        "ProofError", "RootMismatchError", "LedgerError", "LedgerBrokenError",
        "LedgerRollbackError", "TranscriptFormatError", "BankError",
    ):  # fmt: skip
        assert name in _classes(), name


def test_root_mismatch_error_carries_both_roots() -> None:
    """RootMismatchError keeps expected and calculated roots and names them in hex."""
    expected, calculated = bytes(range(32)), bytes(32)
    error = errors.RootMismatchError(expected, calculated)
    assert error.expected == expected
    assert error.calculated == calculated
    assert expected.hex() in str(error) and calculated.hex() in str(error)
    assert isinstance(error, ValueError)
    assert error.where is None
    with pytest.raises(errors.ProofError):
        raise error
    named = errors.RootMismatchError(expected, calculated, where="tile/0/000")
    assert named.where == "tile/0/000"
    assert str(named) == (
        f"tile/0/000: root mismatch: expected {expected.hex()}, calculated {calculated.hex()}"
    )


def test_structured_attributes() -> None:
    """Errors carry the offending value, offset, report or seqs they were given."""
    assert errors.IntegerDomainError("big", 2**60).value == 2**60
    assert errors.CanonicalizationError("x").value is None
    syntax = errors.JSONSyntaxError("bad", "x]", pos=7)
    assert (syntax.value, syntax.pos) == ("x]", 7)
    assert errors.LedgerBrokenError("broken", report="r").report == "r"
    rollback = errors.LedgerRollbackError("back", expected_seq=9, found_seq=3)
    assert (rollback.expected_seq, rollback.found_seq) == (9, 3)
    assert isinstance(errors.UnsupportedTypeError("t"), TypeError)
