"""The import graph of dpjax, accounting and optimize: layers point one way and no module
imports itself back through others (a lazy import inside a function counts: it is an edge all
the same, and a circle of them is a tangle a reader has to hold in mind); the test files mirror the modules."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dpjax", "accounting", "optimize")
#: a package may import only the packages below it
BELOW = {"dpjax": (), "accounting": ("dpjax",), "optimize": ("dpjax", "accounting")}
#: the parts of dpjax that sit above accounting (docs/architecture.md)
ABOVE = ("dpjax/cli/", "dpjax/table/")


def _modules():
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


def _imports(name, path, modules):
    """The modules of ours that ``name`` imports anywhere in its source, relative imports resolved;
    ``from package import module`` is an edge to the module, ``from module import name`` to the module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph():
    modules = _modules()
    return modules, {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
    return found


def test_circles_finds_a_circle_and_only_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    _, graph = _graph()
    assert circles(graph) == []


def test_imports_point_down_the_layers():
    """dpjax imports nothing of accounting or optimize, lazily or not, outside its command line
    (dpjax/cli/) and the table-release layer (dpjax/table/); accounting imports nothing of optimize;
    nothing imports the command line."""
    modules, graph = _graph()
    upward, into_cli = [], []
    for name, targets in graph.items():
        rel = modules[name].relative_to(ROOT).as_posix()
        package = name.split(".")[0]
        for target in targets:
            top = target.split(".")[0]
            if top != package and top not in BELOW[package] and not rel.startswith(ABOVE):
                upward.append(f"{rel}: {target}")
            if target.startswith("dpjax.cli") and not rel.startswith("dpjax/cli/"):
                into_cli.append(f"{rel}: {target}")
    assert upward == [] and into_cli == []
    # the test sees what it must: the CLI does reach up (lazily), and the graph holds every package
    assert any(t.startswith(("accounting", "optimize")) for n in modules if n.startswith("dpjax.cli") for t in graph[n])
    assert {"dpjax.release", "accounting.rdp", "optimize.dpsgd"} <= set(graph)


#: the test files of the project as a whole rather than of one module (tests/README.md)
WHOLE_PROJECT = ("conftest", "contract", "docs", "import_graph", "self_contained")


def test_test_files_are_named_after_the_module_they_test():
    """tests/README.md: the tests of ``pkg/sub/mod.py`` are in ``tests/test_pkg_sub_mod[_aspect].py`` (``dpjax`` left
    out, a module's leading underscore too), so the test tree mirrors the packages instead of naming kinds of check."""
    names = {"_".join(p.lstrip("_") for p in m.split(".")) for m in _modules()}
    names = {n.removeprefix("dpjax_") for n in names} | set(WHOLE_PROJECT)
    stems = [path.stem.removeprefix("test_") for path in (ROOT / "tests").glob("test_*.py")]
    assert sorted(s for s in stems if not any(s == n or s.startswith(n + "_") for n in names)) == []
