"""The codebase's shape: no import cycle among the plugin's modules nor among its packages,
the package graph as docs/architecture.md draws it, no Hermes release named outside hermes/,
and a checkout whose folder name is not a Python identifier still runs the tests."""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_DIRS = ("", "host", "hermes", "compaction", "settings", "runtime", "common",
                "memory_gateway", "context", "archive", "ops", "status", "session")
# the root holds the plugin's entry and the design card's own files; everything else is a folder
ROOT_MODULES = {"", "__main__", "engine", "hooks"}
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def product_modules() -> Dict[str, Path]:
    """Dotted module name (relative to the plugin package) → file."""
    out: Dict[str, Path] = {}
    for folder in PRODUCT_DIRS:
        for path in sorted((ROOT / folder).glob("*.py")):
            stem = path.stem
            if folder:
                name = folder if stem == "__init__" else "%s.%s" % (folder, stem)
            else:
                name = "" if stem == "__init__" else stem
            out[name] = path
    return out


def imports_of(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The plugin modules ``name`` imports (relative imports resolved; any depth)."""
    is_pkg = path.stem == "__init__"
    package = name if is_pkg else name.rpartition(".")[0]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package.split(".") if package else []
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = ".".join(base + (node.module.split(".") if node.module else []))
        candidates = [target] + ["%s.%s" % (target, a.name) if target else a.name for a in node.names]
        found.update(c for c in candidates if c in known and c != name)
    return found


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_the_import_graph_has_no_cycle():
    modules = product_modules()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    # a package's __init__ importing its own submodules is how packages work, not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if not (name and t.startswith(name + "."))}
    graph[""] = {t for t in graph[""] if "." not in t}
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(c or "<root>" for c in cycle)


def unit_of(module: str) -> str:
    """A module's unit: its top-level folder, or the root module itself (``""`` is __init__)."""
    return module.split(".")[0] if module else "__init__"


def package_graph() -> Dict[str, Set[str]]:
    """Unit -> the units it imports, every import counted: at the top, inside a function, under
    TYPE_CHECKING. A unit is a top-level folder or a root module."""
    modules = product_modules()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        unit = unit_of(name)
        targets = {unit_of(t) for t in imports_of(name, path, set(modules))}
        graph.setdefault(unit, set()).update(targets - {unit})
    return graph


def test_the_packages_import_downward_only():
    """Between packages too: a circle of packages is a layer that exists on paper only, even
    where every file-level import is acyclic."""
    cycle = find_cycle(package_graph())
    assert not cycle, "packages import each other in a circle: " + " -> ".join(cycle)


def documented_graph(text: str) -> Dict[str, Set[str]]:
    """The table between the ``package-graph`` markers of docs/architecture.md."""
    table = text.split("<!-- package-graph -->")[1].split("<!-- /package-graph -->")[0]
    graph: Dict[str, Set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        unit = cells[0].strip("`").rstrip("/").replace(".py", "")
        graph[unit] = {c.strip().strip("`").rstrip("/").replace(".py", "")
                       for c in cells[1].split(",") if c.strip().startswith("`")}
    return graph


def test_the_architecture_doc_draws_the_graph_the_code_has():
    assert documented_graph(ARCHITECTURE.read_text(encoding="utf-8")) == package_graph(), (
        "docs/architecture.md's package table differs from the code; the table the code has:\n"
        + graph_table(package_graph()))


def graph_table(graph: Dict[str, Set[str]]) -> str:
    """The package table as docs/architecture.md holds it, lowest layer first."""
    order: List[str] = []
    while len(order) < len(graph):
        ready = sorted(u for u in graph if u not in order and graph[u] <= set(order))
        order += ready or sorted(set(graph) - set(order))
    def cell(unit: str) -> str:
        return "`%s`" % (unit + ".py" if unit in ROOT_MODULES or unit == "__init__" else unit + "/")
    rows = ["| %s | %s |" % (cell(u), ", ".join(cell(t) for t in sorted(graph[u], key=order.index))
                             or "nothing of the plugin") for u in order]
    return "\n".join(["| package | imports from |", "|---|---|"] + rows)


def test_a_circle_of_packages_is_found():
    assert find_cycle({"archive": {"memory_gateway"}, "memory_gateway": {"archive"}})
    doc = "<!-- package-graph -->\n| `a/` | `b/` |\n| `b/` | nothing of the plugin |\n<!-- /package-graph -->"
    assert documented_graph(doc) == {"a": {"b"}, "b": set()}


def test_the_root_holds_only_the_entry_points_and_folders():
    root = {name for name in product_modules() if "." not in name and name not in PRODUCT_DIRS}
    assert root <= ROOT_MODULES, "root modules that belong in a folder: %s" % (root - ROOT_MODULES)
    assert set(PRODUCT_DIRS[1:]) <= {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_nothing_imports_the_operator_commands():
    modules = product_modules()
    for name, path in modules.items():
        if name == "ops" or name.startswith("ops."):
            continue
        assert not {t for t in imports_of(name, path, set(modules)) if t.startswith("ops")}, name


def test_every_module_says_its_job_first():
    for path in product_modules().values():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if path.stem == "__init__" and path.parent != ROOT and not doc:
            continue
        assert doc and doc.splitlines()[0].strip(), "%s has no docstring" % path


# A Hermes release named in text: one the plugin knows (0.17 … 0.23, a patch level too), any
# three-part 0.x.y, or "Hermes 0.x"; in code, a version tuple. A ratio like 0.19 in code is none.
RELEASE_IN_TEXT = (re.compile(r"\b0\.(17|19|22|23)(\.\d+)*\b"), re.compile(r"\b0\.\d{2}\.\d+\b"),
                   re.compile(r"\bHermes\W{1,3}0\.\d{2}\b"))
RELEASE_IN_CODE = re.compile(r"\(0,\s*(17|19|22|23)(,\s*\d+)?\)")


def release_mentions(path: Path) -> List[str]:
    """``line: text`` of each Hermes release ``path`` names: in its comments and strings
    (docstrings included), or as a version tuple in its code."""
    found: Dict[int, List[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            hits = [(tok.start[0] + tok.string[:m.start()].count("\n"), m.group())
                    for rx in RELEASE_IN_TEXT for m in rx.finditer(tok.string)]
        elif tok.type == tokenize.NEWLINE:
            hits = [(tok.start[0], m.group()) for m in RELEASE_IN_CODE.finditer(tok.line)]
        else:
            continue
        for line, hit in hits:
            if not any(hit in other or other in hit for other in found.get(line, ())):
                found.setdefault(line, []).append(hit)
    return ["%d: %s" % (line, hit) for line in sorted(found) for hit in found[line]]


def test_only_the_host_description_names_a_hermes_release():
    """Outside ``hermes/`` no product file branches on a Hermes version or names one: code asks
    ``hermes.host.running_host()`` (or ``hermes.releases``) what the host does, comments and
    messages say that behaviour. Docs and tests may name releases."""
    offenders = {str(path.relative_to(ROOT)): hits for name, path in product_modules().items()
                 if unit_of(name) != "hermes" for hits in [release_mentions(path)] if hits}
    assert not offenders, "Hermes releases named outside hermes/ (say what the host does):\n" + \
        "\n".join("%s:%s" % (f, h) for f, hits in sorted(offenders.items()) for h in hits)


def test_a_release_mention_is_found_and_a_ratio_is_not(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Hosts differ.\n\nOn Hermes 0.24 it differs."""\nSINCE = (0, 22, 0)  # 0.19+\n'
                      'W = 0.19, 0.27  # of the window: 0.27\nX = "pin 0.22.2"\n', encoding="utf-8")
    assert release_mentions(sample) == ["3: Hermes 0.24", "4: 0.19", "4: (0, 22, 0)", "6: 0.22.2"]


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def test_a_checkout_named_like_the_plugin_runs_its_tests(tmp_path):
    """``git clone`` makes ``tencentdb-offload/``: not a Python identifier, yet pytest must not
    import the plugin package under a name taken from the folder. Run part of the unit suite
    there (not this file: it would recurse)."""
    if os.environ.get("TDO_NESTED_CHECKOUT"):
        return
    for folder in ("tencentdb-offload", "ci fresh.1"):
        dest = tmp_path / folder
        dest.mkdir()
        _copy_checkout(dest)
        env = dict(os.environ, TDO_NESTED_CHECKOUT="1", PYTHONDONTWRITEBYTECODE="1")
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/unit/test_messages.py", "tests/unit/test_engine_local.py",
                              "tests/unit/test_cli.py::test_help_for_every_command"],
                             cwd=str(dest), env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, "in %s:\n%s%s" % (folder, run.stdout[-3000:], run.stderr[-2000:])
        assert " passed" in run.stdout and "error" not in run.stdout.lower().split("passed")[-1]
