"""Hypothesis strategies for property-based tests of code built on merkle_memory.

This module needs Hypothesis, which the package itself does not: install the ``test`` extra
(``pip install 'merkle_memory[test]'``). Importing ``merkle_memory`` never imports this module;
importing it without Hypothesis raises an ``ImportError`` that says what to install.

What it offers, one strategy per concept of the library:

- :func:`json_values`: values inside the RFC 8785 domain (DESIGN section 2), accepted by
  ``canonical.dumps``; :func:`out_of_domain_values`: values it must reject, with the error.
- :func:`block_dicts`, :func:`bucket_dicts`, :func:`with_harness_noise`: tapes-style content
  blocks and buckets (DESIGN section 3), and the same bucket as a harness would record it
  (``<system-reminder>`` text, thinking signatures, zero-valued tool arguments, metadata)
  so that its node hash must not change.
- :func:`conversations`: conversation trees with branches and noise, with
  :func:`conversation_hashes` to hash them through ``dag.node_hash``.
- :func:`memory_fields` and :func:`memories` for the memory bank (DESIGN section 5).
- :func:`ledger_scenarios` and :func:`materialize_ledger` for ledgers with optional
  tampering or a torn tail (DESIGN section 4).

Every strategy is a plain function returning a ``SearchStrategy`` of a stated type (JSON
values as :data:`merkle_memory.canonical.JSONValue`, dicts as the ``TypedDict`` classes
:class:`BlockDict`, :class:`BucketDict`, :class:`MemoryFields`, :class:`LedgerRecord`, never
``Any``); use it in ``@given``.

Temporary folders: pytest's ``tmp_path`` is one folder per test function, shared by every
example Hypothesis runs, and Hypothesis refuses it (the ``function_scoped_fixture`` health
check). Make a fresh folder inside the test instead::

    @given(ledger_scenarios(tamper=False))
    def test_honest_tenants_verify(scenario):
        with tempfile.TemporaryDirectory() as tmp:
            assert materialize_ledger(scenario, tmp).verify().ok
"""

from __future__ import annotations

try:
    import hypothesis  # noqa: F401  (checked first, for a clear message)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "merkle_memory.strategies needs Hypothesis, which merkle_memory does not install by "
        "default: pip install 'merkle_memory[test]' (or pip install hypothesis)"
    ) from exc

from ._dag import (
    HARNESS_NOISE_TAGS,
    BlockDict,
    BucketDict,
    Conversation,
    Turn,
    block_dicts,
    bucket_dicts,
    conversation_dag,
    conversation_hashes,
    conversations,
    with_harness_noise,
)
from ._json import json_scalars, json_texts, json_values, out_of_domain_values
from ._ledger import (
    TAMPER_KINDS,
    LedgerRecord,
    LedgerScenario,
    Tamper,
    ledger_scenarios,
    materialize_ledger,
)
from ._memory import MemoryFields, memories, memory_fields

__all__ = [
    "HARNESS_NOISE_TAGS",
    "TAMPER_KINDS",
    "BlockDict",
    "BucketDict",
    "Conversation",
    "LedgerRecord",
    "LedgerScenario",
    "MemoryFields",
    "Tamper",
    "Turn",
    "block_dicts",
    "bucket_dicts",
    "conversation_dag",
    "conversation_hashes",
    "conversations",
    "json_scalars",
    "json_texts",
    "json_values",
    "ledger_scenarios",
    "materialize_ledger",
    "memories",
    "memory_fields",
    "out_of_domain_values",
    "with_harness_noise",
]
