"""The layers hold, read from the source (every import, lazy ones inside functions included):
no module imports one that imports it back (issue 30), domain/ never imports Beam, transforms/ never
imports pipelines/ or knows a family, runners/ (the processes a run lives in) knows nothing of the job,
analysis/ (what finished runs' rows say) uses the domain and nothing of the job nor Beam, domain/ never
imports analysis/, docgen/ (the data dictionary) renders the domain's declarations and nothing imports it,
no command (pipelines/ but the demo), transform, analysis or domain module imports
the simulator (sample/), and no module below the console entry point ends the process (SystemExit)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "analysis", "transforms", "pipelines", "runners", "bench", "sample", "docgen")
PROJECT = {*PACKAGES, "assets"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports_of(path: Path) -> set[str]:
    """Every module name an import statement of ``path`` names (``from a.b import c``: ``a.b.c`` and ``a.b``)."""
    named = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named.add(node.module)
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
    return named


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {}
    for name, path in known.items():
        graph[name] = {n for n in imports_of(path) if n in known} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member); component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_are_found_when_there_are_some():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def test_domain_never_imports_beam_and_transforms_never_import_pipelines():
    for name, path in modules().items():
        named = imports_of(path)
        if name.startswith("domain"):
            assert not any(n.split(".")[0] == "apache_beam" for n in named), name
        if name.startswith("transforms"):
            assert not any(n.split(".")[0] in ("pipelines", "sample") for n in named), name
            assert not any(n.startswith("domain.families") for n in named), name


# The root of the project's errors (it imports nothing): what every package raises, runners/ included.
ERROR_ROOT = "domain.errors"


def test_runners_know_nothing_of_the_job():
    """Process management (warm workers, the collector's policy, runner errors and workarounds) imports no
    package of the project but the error root: the job, its transforms and its domain use it, never the other way."""
    assert {n.split(".")[0] for n in imports_of(modules()[ERROR_ROOT])} <= {"__future__"}
    for name, path in modules().items():
        if name.startswith("runners"):
            used = {n for n in imports_of(path) if n != ERROR_ROOT and not n.startswith(ERROR_ROOT + ".")}
            assert not any(n.split(".")[0] in PROJECT - {"runners"} for n in used), name


def test_analysis_reads_rows_with_the_domain_and_nothing_of_the_job():
    """analysis/ (retry economy, run summary, comparing two runs) computes over the rows of finished runs:
    it may import domain/, never Beam, transforms/, pipelines/ or runners/; domain/ never imports it."""
    for name, path in modules().items():
        named = imports_of(path)
        if name.startswith("analysis"):
            assert not any(n.split(".")[0] in ("apache_beam", "transforms", "pipelines", "runners")
                           for n in named), name
        if name.startswith("domain"):
            assert not any(n.split(".")[0] == "analysis" for n in named), name


def test_transforms_and_domain_never_launch_a_runner():
    """A transform runs inside a worker: of runners/ it uses the collector's policy (its DoFns' first bundle)
    and nothing that starts workers or runners; the domain uses none of it."""
    for name, path in modules().items():
        used = {n for n in imports_of(path) if n.split(".")[0] == "runners"}
        if name.startswith("transforms"):
            assert all(n == "runners.collector" or n.startswith("runners.collector.") for n in used), (name, used)
        if name.startswith("domain"):
            assert not used, name


def reached_from(name: str, graph: dict[str, set[str]]) -> set[str]:
    """``name`` and every project module it imports, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_the_parsing_of_raw_records_never_imports_beam():
    """What the read step does to a record's bytes (transforms.raw_records) runs and is tested without Beam:
    neither it nor anything it imports names apache_beam."""
    known, graph = modules(), import_graph()
    for name in reached_from("transforms.raw_records", graph):
        assert not any(n.split(".")[0] == "apache_beam" for n in imports_of(known[name])), name


def top_level_imports_of(path: Path) -> set[str]:
    """The module names ``path`` imports when it is imported: ``imports_of`` without those inside functions."""
    named, todo = set(), list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named.add(node.module)
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return named


# The demo plays the producer (sample/) and then runs the commands on what it wrote: it is the one module of
# pipelines/ that runs the simulator, and no other module imports it.
DEMO = "pipelines.demo"


def test_no_command_the_job_nor_the_domain_imports_the_simulator():
    """The simulator's vocabulary reaches the retry economy and the report as data, on the first line of the
    --truth file (pipelines.truth): no module of domain/, analysis/, transforms/ or pipelines/ names sample/
    (lazy imports included) nor loads it when imported - but the demo, which nothing imports."""
    known = modules()
    graph = {name: {n for n in top_level_imports_of(path) if n in known} - {name} for name, path in known.items()}
    guarded = [name for name in known if name.split(".")[0] in ("domain", "analysis", "transforms", "pipelines")
               and name != DEMO]
    assert "pipelines.truth" in guarded and "pipelines.report" in guarded
    for name in guarded:
        assert not any(n.split(".")[0] == "sample" for n in imports_of(known[name])), name
        loaded = reached_from(name, graph)
        assert not any(module.split(".")[0] == "sample" for module in loaded), (name, sorted(loaded))
        assert DEMO not in imports_of(known[name]), name


def test_documentation_is_rendered_outside_the_domain_from_its_declarations():
    """docgen/ (the data dictionary's renderer) reads the declarations of domain/ and the schema files of
    assets/, nothing of the job; no other package imports it (the domain declares, docgen renders)."""
    for name, path in modules().items():
        named = {n.split(".")[0] for n in imports_of(path)}
        if name.startswith("docgen"):
            assert not named & (PROJECT - {"docgen", "domain", "assets"}) and "apache_beam" not in named, name
        else:
            assert "docgen" not in named, name


def test_the_simulator_knows_the_domain_not_the_job():
    """sample/ (the simulated producer and batch provider, a stand-in for a model) writes what the job reads:
    it imports the domain's contracts, nothing of the job's transforms, runners, pipelines or bench."""
    for name, path in modules().items():
        if name.startswith("sample"):
            assert not any(n.split(".")[0] in ("transforms", "runners", "pipelines", "bench")
                           for n in imports_of(path)), name


# The console entry point: where a command's process starts (pipelines.entry) and where what ended a command
# becomes its line and exit code (pipelines.interruption.run_command). Nothing else ends the process.
COMMAND_LAYER = ("pipelines.entry", "pipelines.interruption")
PRODUCT = ("domain", "analysis", "transforms", "runners", "pipelines", "docgen")


def _is_main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: a module run as a program (the zygote's client, a command's hand-off)."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators))


def process_exits(path: Path) -> list[str]:
    """Where ``path`` raises or builds a SystemExit, or calls ``sys.exit``, outside its ``__main__`` block
    (``except SystemExit`` is no exit: a worker reads the status of the code it ran)."""
    found, todo = [], [node for node in ast.parse(path.read_text(encoding="utf-8")).body if not _is_main_block(node)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and node.id == "SystemExit":
            found.append(f"{path.name}:{node.lineno} SystemExit")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exit" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "sys":
            found.append(f"{path.name}:{node.lineno} sys.exit")
        if isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)  # what it catches is not raised here
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def test_process_exits_are_found_where_there_are_some(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import sys\ndef f():\n    raise SystemExit('no')\ndef g():\n    sys.exit(2)\n"
                      "def h():\n    try:\n        pass\n    except SystemExit:\n        pass\n"
                      "if __name__ == '__main__':\n    sys.exit(f())\n")
    assert sorted(process_exits(source)) == ["m.py:3 SystemExit", "m.py:5 sys.exit"]


def test_no_module_below_the_command_layer_ends_the_process():
    """Library code raises the project's errors (domain.errors.NotariusError); only the console entry point
    turns one into an exit, with its one line and exit code (issue 39): no SystemExit anywhere else in the
    product's packages but a module's ``if __name__ == "__main__"`` block."""
    known = modules()
    assert set(COMMAND_LAYER) <= set(known)
    exits = [where for name, path in sorted(known.items())
             if name.split(".")[0] in PRODUCT and name not in COMMAND_LAYER for where in process_exits(path)]
    assert exits == []


# A module a reader can hold in mind: past this, it does more than one job and is split by job (issue 39).
MAX_MODULE_LINES = 600
SIZED_PACKAGES = ("domain", "analysis", "transforms", "pipelines", "runners", "docgen", "sample")


def test_no_product_module_is_over_600_lines():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()
             if name.split(".")[0] in SIZED_PACKAGES}
    assert len(sizes) > 50  # the packages were found
    assert {name: n for name, n in sorted(sizes.items()) if n > MAX_MODULE_LINES} == {}
