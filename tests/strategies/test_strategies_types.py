"""The public strategies and helpers state their types (issue 16 item 11): no
``SearchStrategy[Any]``, and ``materialize_ledger``, ``conversation_dag`` and
``canonical.loads`` return named types. ``tests/typing/public_api.py`` checks the same
statically (``mypy --strict tests/typing``)."""

from __future__ import annotations

import inspect
import typing
from typing import Any

from hypothesis.strategies import SearchStrategy

from merkle_memory import canonical, strategies
from merkle_memory.bank.memory import Memory
from merkle_memory.dag import Dag
from merkle_memory.ledger.tenant import Tenant

_NAMES = {"Tenant": Tenant, "Dag": Dag, "Memory": Memory}


def _return_type(function: Any) -> Any:
    return typing.get_type_hints(function, localns=_NAMES)["return"]


def _strategy_arguments(annotation: Any) -> list[Any]:
    """The type arguments of every SearchStrategy[...] inside ``annotation``."""
    found = []
    if typing.get_origin(annotation) is SearchStrategy:
        found.extend(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        found.extend(_strategy_arguments(arg))
    return found


def test_no_public_strategy_is_a_strategy_of_any() -> None:
    """Each public function returning a SearchStrategy names what it draws (never Any)."""
    returning = {}
    for name in strategies.__all__:
        function = getattr(strategies, name)
        if inspect.isfunction(inspect.unwrap(function)):
            arguments = _strategy_arguments(_return_type(function))
            if arguments:
                returning[name] = arguments
    assert sorted(returning) == [
        "block_dicts",
        "bucket_dicts",
        "conversations",
        "json_scalars",
        "json_texts",
        "json_values",
        "ledger_scenarios",
        "memories",
        "memory_fields",
        "out_of_domain_values",
        "with_harness_noise",
    ]
    assert [name for name, args in returning.items() if Any in args] == []
    assert returning["memories"] == [Memory]
    assert returning["memory_fields"] == [strategies.MemoryFields]
    assert returning["block_dicts"] == [strategies.BlockDict]
    assert typing.get_overloads(strategies.json_values)[0].__annotations__["return"] == (
        "SearchStrategy[JSONValue]"
    )
    assert strategies.json_values.__annotations__["return"] == (
        "SearchStrategy[JSONValue] | SearchStrategy[JSONInput]"
    )


def test_helpers_return_named_types() -> None:
    """materialize_ledger -> Tenant, conversation_dag -> Dag, conversation_hashes ->
    list[str], canonical.loads -> JSONValue."""
    assert _return_type(strategies.materialize_ledger) is Tenant
    assert _return_type(strategies.conversation_dag) is Dag
    assert _return_type(strategies.conversation_hashes) == list[str]
    assert canonical.loads.__annotations__["return"] == "JSONValue"
    assert typing.get_args(canonical.JSONValue)[:5] == (bool, int, float, str, type(None))


def test_typed_dicts_hold_the_fields_drawn() -> None:
    """The TypedDicts name exactly the keys DESIGN sections 3 and 5 give."""
    assert set(strategies.MemoryFields.__annotations__) == {
        "type",
        "scope",
        "content",
        "tags",
        "timestamp",
        "source_session",
        "links",
    }
    assert strategies.BlockDict.__required_keys__ == frozenset({"type"})
    assert strategies.BucketDict.__required_keys__ == frozenset({"type", "role", "content"})
    assert strategies.LedgerRecord.__required_keys__ == frozenset({"id", "summary"})
