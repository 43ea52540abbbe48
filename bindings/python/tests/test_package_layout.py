"""The Python package's shape, read from its source (no imports run):
no import cycle among kolo's modules (module level or inside functions),
no module over 500 lines, and kolo/runner on the standard library alone (kolorun loads it
without kolo's library or any other package, on hosts that may have
neither)."""
import ast
import os
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kolo")
MAX_LINES = 500


def _modules():
    """{dotted name: path} for every module of the kolo package."""
    found = {}
    root = os.path.dirname(os.path.abspath(PACKAGE))
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def _ancestors(name):
    """The packages that importing `name` runs first: a.b for a.b.c (kolo
    itself left out: every module is in it)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]


def _imports(name, path, modules):
    """The kolo modules `name` imports, at module level or inside a
    function (an import deferred to a call is still a dependency), with the
    packages each import runs first; `name`'s own ancestors left out, since
    importing it has run them already."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package
                for _ in range(node.level - 1):
                    up = up.rpartition(".")[0]
                base = up + ("." + node.module if node.module else "")
            submodules = [base + "." + a.name for a in node.names if base + "." + a.name in modules]
            targets = submodules if len(submodules) == len(node.names) else [base] + submodules
        else:
            continue
        targets += [a for t in targets for a in _ancestors(t)]
        found.update(t for t in targets if t in modules and t != name and not name.startswith(t + "."))
    return found


def test_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    state = {}  # name -> "open" while on the path, "done" after

    def visit(name, path):
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                pytest.fail("import cycle: %s" % " -> ".join(path[path.index(other):] + [other]))
            if other not in state:
                visit(other, path + [other])
        state[name] = "done"
    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_no_module_over_500_lines():
    long = {name: sum(1 for _ in open(path)) for name, path in _modules().items()}
    assert {n: k for n, k in long.items() if k > MAX_LINES} == {}


# Imported where one option needs it, with an error naming the package when
# it is missing: Horovod's --config-file is YAML.
RUNNER_OPTIONAL = {"kolo.runner.horovodrun_flags": {"yaml"}}


def test_the_runner_needs_only_the_standard_library():
    stdlib = sys.stdlib_module_names
    for name, path in _modules().items():
        if not name.startswith("kolo.runner"):
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [node.module.split(".")[0]]
            else:
                continue
            allowed = stdlib | RUNNER_OPTIONAL.get(name, set())
            assert all(t in allowed for t in tops), "%s imports %s, not the standard library" % (name, tops)
