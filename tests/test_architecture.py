"""The package's shape: layers import only downward, no cycles, private parts stay private.

Every ``import`` of ``merkle_memory/`` is read from the source (including those under
``TYPE_CHECKING`` and inside functions) and checked against the layer map of
docs/DESIGN.md ("Package map").
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "merkle_memory"

# Lowest first; a module may import modules of its own layer's package or of lower layers.
LAYERS: list[set[str]] = [
    {"errors", "_fork"},
    {"_fsio", "_pg", "_progress", "canonical"},
    {"_json", "rfc6962"},
    {"blocks", "proof"},
    {"projection", "signed_note"},
    {"dag", "checkpoint"},
    {"transcripts", "ledger"},
    {"bank", "tlog"},
    {"strategies"},
    {""},  # the package's own __init__: the everyday surface
    {"cli"},
    {"__main__"},
]
MAX_LOOSE = 12


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name below ``merkle_memory`` ("" for the root) -> (file, is a package)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _owner(name: str) -> str:
    """The module an import of ``name`` lands in (the longest existing prefix)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else ""


def _imports(module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module below ``merkle_memory``) for every import in ``module``."""
    path, is_pkg = MODULES[module]
    here = module.split(".") if module else []
    if not is_pkg:
        here = here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "merkle_memory" or alias.name.startswith("merkle_memory."):
                    yield node.lineno, _owner(alias.name.removeprefix("merkle_memory").lstrip("."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (
                node.module == "merkle_memory" or node.module.startswith("merkle_memory.")
            ):
                stem = node.module.removeprefix("merkle_memory").lstrip(".")
            else:
                continue
            for alias in node.names:
                yield node.lineno, _owner(f"{stem}.{alias.name}" if stem else alias.name)


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for _line, target in _imports(module):
            if target != module:
                edges[module].add(target)
    return edges


def _top(module: str) -> str:
    return module.split(".")[0]


def _layer(module: str) -> int:
    for index, names in enumerate(LAYERS):
        if _top(module) in names:
            return index
    raise AssertionError(f"merkle_memory.{module} is in no layer of LAYERS")


def test_every_module_has_a_layer() -> None:
    """A new top-level module or package must be placed in the layer map on purpose."""
    for module in MODULES:
        _layer(module)


def test_imports_only_go_down() -> None:
    """No module imports a higher layer or a sibling package of its own layer."""
    bad = []
    for module in MODULES:
        for line, target in _imports(module):
            if _top(target) == _top(module) or (module and target == ""):
                continue  # inside one package; "from .. import __version__" style
            if _layer(target) >= _layer(module):
                bad.append(f"merkle_memory.{module}:{line} imports merkle_memory.{target}")
    assert bad == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    """The cycle check itself works (a check that cannot fail proves nothing)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    """No cycle at all, counting ``TYPE_CHECKING`` and function-level imports.

    A package's ``__init__`` re-exporting its own submodules is not a cycle (the submodules
    never import their package's ``__init__``; that is checked here too).
    """
    edges = _edges()
    for module, (_path, is_pkg) in MODULES.items():
        if is_pkg:  # __init__ -> own submodules: a re-export, not a dependency
            edges[module] = {t for t in edges[module] if not t.startswith(f"{module}.")}
    for module in MODULES:
        parent = module.rsplit(".", 1)[0] if "." in module else ""
        if module and MODULES.get(parent, (None, False))[1] and parent != "":
            assert parent not in edges[module], f"{module} imports its own package __init__"
    assert _cycles(edges) == []


def test_no_private_module_of_another_package_is_imported() -> None:
    """``pkg._private`` is imported only from inside ``pkg`` (top-level ``_x`` are shared)."""
    bad = []
    for module in MODULES:
        for line, target in _imports(module):
            parent, _, leaf = target.rpartition(".")
            if not leaf.startswith("_") or leaf.startswith("__") or not parent:
                continue
            if not (module == parent or module.startswith(f"{parent}.")):
                bad.append(f"merkle_memory.{module}:{line} imports merkle_memory.{target}")
    assert bad == []


def test_few_loose_modules() -> None:
    """At most a dozen modules stand loose at the top; concepts with parts are packages."""
    loose = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(loose) <= MAX_LOOSE, loose


def _private_names(tree: ast.Module) -> set[str]:
    """Private names a module's own classes define: methods, class attributes, slots and
    ``self._x`` assignments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                    names.add(item.attr)
                elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                    names.add(item.id)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.add(item.value)  # __slots__ entries
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_member_of_another_class_is_used(module: str) -> None:
    """``obj._name`` only where ``_name`` belongs to a class of the same module (``self``,
    ``cls``, ``super()`` or another instance of that class); never another module's class."""
    tree = ast.parse(MODULES[module][0].read_text(encoding="utf-8"))
    own = _private_names(tree)
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "super":
            continue
        if isinstance(value, ast.Name) and value.id in ("os", "sys", "_thread"):
            continue  # stdlib modules' documented underscore names (e.g. sys._getframe)
        bad.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert bad == []


def test_nothing_imports_the_command_line() -> None:
    """``cli`` is the top: no library module depends on it."""
    bad = [
        f"merkle_memory.{m}:{line}"
        for m in MODULES
        if _top(m) not in ("cli", "__main__")
        for line, target in _imports(m)
        if _top(target) == "cli"
    ]
    assert bad == []


def test_layer_map_matches_the_design_document() -> None:
    """The rows of docs/DESIGN.md's "Package map" are exactly LAYERS (one source of truth
    for readers, checked here so the two cannot drift)."""
    rows: dict[int, set[str]] = {}
    text = (REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    section = text.split("### Package map", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            name = cells[1].strip("`").rstrip("/")
            rows.setdefault(int(cells[0]), set()).add("" if name == "__init__" else name)
    assert [rows[i] for i in sorted(rows)] == LAYERS
