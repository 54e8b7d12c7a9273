"""No import circles between the package's modules, lazy imports included.

Every module under ``onlinepgs/`` is read, not imported: the Python modules with `ast`,
the Cython ones (``.pyx``) for their Python-level import statements (a ``cimport`` is
resolved when compiling). An edge A -> B is any import of B in A, at module level or
inside a function, and also ``importlib.import_module`` of a name A spells out (a
constant, or an f-string's constant head followed by one of A's string constants). A
lazy package (a ``_HOMES`` table read by its ``__getattr__``, PEP 562) is followed per
name: ``from onlinepgs.streaming import train_stream`` is an edge to the module that
defines ``train_stream``. Importing a submodule runs its packages' ``__init__`` first,
but does not call their functions: that is no edge.

A circle means two modules each need the other, so neither can be understood, tested or
moved alone; a shared piece has one home (docs/design/README.md: the layout).
"""
import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "onlinepgs"
# a Cython module's Python-level imports, one a line (cimports filtered out below)
_PYX_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+import[ \t]+[\w, ]+|import[ \t]+[\w.]+)",
                         re.M)


def _modules():
    """Dotted name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.rglob("*.pyx")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _tree(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return ast.parse(text, str(path))
    kept = [""] * (text.count("\n") + 1)  # the import lines at their own line numbers
    for match in _PYX_IMPORT.finditer(text):
        line = match.group(0).strip()
        if not line.startswith("cimport") and " cimport " not in line:
            kept[text.count("\n", 0, match.start())] = line
    return ast.parse("\n".join(kept), str(path))


def _lazy_homes(tree, package):
    """A lazy package's table: public name -> the module defining it ({} if none)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_HOMES" for t in node.targets):
            table = eval(compile(ast.Expression(node.value), "_HOMES", "eval"),
                         {"__builtins__": {}, "dict": dict})
            return {name: home if home.startswith("onlinepgs") else f"{package}.{home}"
                    for name, home in table.items()}
    return {}


def import_graph():
    """Module -> {module it imports: the line of the first such import}."""
    modules = _modules()
    trees = {name: _tree(path) for name, path in modules.items()}
    lazy = {name: _lazy_homes(tree, name) for name, tree in trees.items()
            if modules[name].name == "__init__.py"}
    graph = {}
    for name, tree in trees.items():
        here = name if modules[name].name == "__init__.py" else name.rpartition(".")[0]
        edges = graph[name] = {}
        strings = {n.value for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        bound = {}  # local name -> the onlinepgs module or name it was imported as

        def add(target, line):
            if target != name:
                edges.setdefault(target, line)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "onlinepgs":
                        add(alias.name, node.lineno)
                        bound[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = node.module
                if node.level:
                    base = here.split(".")[:len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                if source.split(".")[0] != "onlinepgs":
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    add(sub if sub in modules else lazy.get(source, {}).get(alias.name, source),
                        node.lineno)
                    bound[alias.asname or alias.name] = sub
            elif (isinstance(node, ast.Call) and not lazy.get(name)  # lazy: per name
                  and getattr(node.func, "attr", getattr(node.func, "id", None))
                  == "import_module"):
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    targets = [arg.value]
                elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                    targets = [arg.values[0].value + s for s in strings]
                else:  # a name: any module this module spells out
                    targets = list(strings)
                for target in targets:
                    if target in modules:
                        add(target, node.lineno)
        # `streaming.train_stream` after `from onlinepgs import streaming`: its home
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                table = lazy.get(bound.get(node.value.id))
                if table and node.attr in table:
                    add(table[node.attr], node.lineno)
    return {name: {t: line for t, line in edges.items() if t in modules}
            for name, edges in graph.items()}


def circles(graph):
    """The strongly connected components of more than one module (Tarjan's), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(graph, component):
    inside = set(component)
    return "\n".join(f"  {a} -> {b} (line {line})" for a in component
                     for b, line in sorted(graph[a].items()) if b in inside)


def test_no_import_circles():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(
        f"{' <-> '.join(c)}:\n{_describe(graph, c)}" for c in found)


# ---- the checker itself, on small graphs and on what it must see ----------------------

def test_circles_finds_each_component_once():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1, "e": 1},
             "e": {"d": 1}, "f": {}}
    assert circles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


@pytest.mark.parametrize("importer, imported", [
    ("onlinepgs.cli.train", "onlinepgs.cli.train_sdca"),      # inside a function
    ("onlinepgs.cli.train", "onlinepgs.cli.train_dask"),
    ("onlinepgs.pgs", "onlinepgs.streaming.engine"),          # a lazy package's name
    ("onlinepgs.cli", "onlinepgs.cli.train"),                 # import_module of a table's
    ("onlinepgs.formats", "onlinepgs.formats.csv"),           # an f-string's head + name
    ("onlinepgs._core._pgs", "onlinepgs._options"),           # Cython, Python-level
    ("onlinepgs.model_io.schema", "onlinepgs.pgs"),           # `from onlinepgs import pgs`
])
def test_the_graph_sees_every_kind_of_import(importer, imported):
    assert imported in import_graph()[importer]


def test_the_graph_sees_no_cimport_and_no_parent_package():
    graph = import_graph()
    assert "onlinepgs._core._mirror" not in graph["onlinepgs._core._pgs"]  # a .pxd
    assert "onlinepgs" not in graph["onlinepgs.pgs"]
