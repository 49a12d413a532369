"""The engine's shape: every difftest module imports alone (no other difftest module loaded), no two
modules import each other (directly or round a loop), and every difftest-internal import
(module-level or inside a function, found with ast) goes down the layer order below, which
follows the data flow: a Problem is modelled, run, judged, searched, reported; a run
orchestrates campaigns; investigations of a kernel, measurements of difftest and adapters sit on
the engine; the command line and the pytest plugin are fronts on all of it. Every subcommand's parser builds."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (layer, module prefixes), lowest first; a module belongs to the longest prefix naming it
LAYERS = [
    ("base", ("difftest.vocab", "difftest.errors", "difftest.safeio", "difftest.workdir", "difftest.printable")),
    ("model", ("difftest.model",)),  # Problem, layouts, Capability, inputs, outputs, profiles
    # argument checks (bounds, writable paths) every front, subcommand and file reader shares
    ("argcheck", ("difftest.argcheck",)),
    ("execute", ("difftest.execute",)),  # the adapter contract and registry, the kernel worker, timing
    ("oracles", ("difftest.oracles",)),  # the float64 truth and the yardsticks
    ("strategies", ("difftest.strategies",)),  # Hypothesis strategies drawing Problems
    ("judge", ("difftest.judge",)),  # one case: run, gates, determinism, attribution, triage
    ("search", ("difftest.search",)),  # the campaign: drawing, shrinking, case log, failure store
    ("report", ("difftest.report",)),  # report files: write, read, html, junit, merge, CI gate
    ("run", ("difftest.run",)),  # a run of campaigns: folder, threads, lanes, prebuild, the RunPlan
    ("investigate", ("difftest.investigate",)),  # one kernel beyond a campaign: bisect, probe, stress, sanitize
    ("measure", ("difftest.measure",)),  # evidence about difftest: calibration, mutants, variants, grid, bench
    ("kernels", ("difftest.kernels",)),  # adapters: reach the engine only through entry points
    ("fronts", ("difftest.commands", "difftest.pytest_plugin", "difftest.__main__")),
]
FOLDERS = {
    "difftest": "difftest",
    "kernels": "difftest.kernels",
    "strategies": "difftest.strategies",
    "oracles": "difftest.oracles",
}


def _modules() -> dict:
    out = {}
    for folder, package in FOLDERS.items():
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT / folder).with_suffix("").parts
            if folder == "difftest" and rel[0] in ("kernels", "strategies", "oracles"):
                continue
            parts = [*package.split("."), *rel]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def layer(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            if (module == pre or module.startswith(pre + ".")) and (best is None or len(pre) > best[1]):
                best = (i, len(pre))
    assert best is not None, f"{module} is in no layer of tests/test_layers.py: add it to one"
    return best[0]


def _exports() -> dict:
    import difftest

    return {n: "difftest." + (v[0] if isinstance(v, tuple) else v) for n, v in difftest._EXPORTS.items()}


def internal_imports(module: str, path: Path) -> list:
    """(imported difftest module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    exports = _exports()
    out = []
    local = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                if base == "difftest" and a.name in exports:
                    targets.append(exports[a.name])  # the public facade: the module behind the name
                else:
                    targets.append(full if full in MODULES else base)
        for t in targets:
            if not t.startswith("difftest"):
                continue
            while t not in MODULES and "." in t:
                t = t.rpartition(".")[0]
            if t != module and t != "difftest":
                out.append((t, node.lineno, id(node) in local))
    return out


def test_every_module_is_in_a_layer():
    for m in MODULES:
        if m != "difftest":
            layer(m)


def test_a_layer_never_carves_a_module_out_of_another_layers_folder():
    """A module lives in its layer's folder: a check every layer shares is a base module, not a
    file of the fronts' commands/ that the engine reaches up into (#45)."""
    prefixes = [(name, pre) for name, pres in LAYERS for pre in pres]
    nested = [
        f"{inner} ({a}) inside {outer} ({b})"
        for a, inner in prefixes
        for b, outer in prefixes
        if a != b and inner.startswith(outer + ".")
    ]
    assert not nested, nested


def test_the_architecture_page_states_this_layer_order():
    """docs/architecture.md's layer line (``a`` → ``b`` → ...) is LAYERS, name for name."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    lines = [ln for ln in text.splitlines() if ln.count("→") >= 2]
    assert len(lines) == 1, f"docs/architecture.md should have one layer line, has {lines}"
    assert [n.strip().strip("`") for n in lines[0].split("→")] == [name for name, _ in LAYERS], lines[0]


def test_every_internal_import_goes_down_the_layers():
    wrong = []
    for m, path in MODULES.items():
        if m == "difftest":
            continue
        for t, line, inside in internal_imports(m, path):
            if layer(t) > layer(m):
                where = "inside a function" if inside else "at module level"
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line} ({LAYERS[layer(m)][0]}) imports {t} "
                    f"({LAYERS[layer(t)][0]}) {where}"
                )
    assert not wrong, "imports going up the layers:\n" + "\n".join(dict.fromkeys(wrong))


def test_no_import_cycles():
    """Function-local imports count: a loop closed inside a function is still a loop."""
    graph = {m: {t for t, _, _ in internal_imports(m, p)} for m, p in MODULES.items() if m != "difftest"}
    seen, stack, cycles = {}, [], []

    def visit(m):
        seen[m] = "open"
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if seen.get(t) == "open":
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in seen:
                visit(t)
        stack.pop()
        seen[m] = "done"

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# Imports sit at the top of their module (#45). A function-local import says why it is one with a
# comment ``# lazy: REASON`` on its line, or on the line above it or above its group of imports:
# it keeps torch (or the run machinery) off ``difftest --help``/``list`` and off every pytest
# session, or it imports an optional dependency (safetensors, Triton) that a host may lack.
# Every folder of MODULES is scanned, kernels/ included: an adapter imports its kernel's optional
# library (flash_attn, cudnn, tilelang, jax...) on first use, so it loads and says why it cannot
# run on a host without it, and says so on that import's line.
LAZY_MARK = "# lazy:"


def function_local_imports(path: Path) -> list:
    """(line, source, marked) of every import inside a function of ``path``."""
    src = path.read_text()
    lines = src.splitlines()
    tree = ast.parse(src)
    local = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local.update({id(n): n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))})
    import_lines = {i for n in local.values() for i in range(n.lineno, n.end_lineno + 1)}
    out = []
    for n in sorted(local.values(), key=lambda n: n.lineno):
        own = lines[n.lineno - 1 : n.end_lineno]
        i = n.lineno - 1
        while i >= 1 and (not lines[i - 1].strip() or i in import_lines):
            i -= 1
        above = lines[i - 1].strip() if i >= 1 else ""
        marked = any(_reason(ln) for ln in own) or (above.startswith("#") and _reason(above))
        out.append((n.lineno, " ".join(x.strip() for x in own), marked))
    return out


def _reason(line: str) -> bool:
    return LAZY_MARK in line and bool(line.split(LAZY_MARK, 1)[1].strip())


def test_every_function_local_import_says_why_it_is_not_at_the_top():
    """An import inside a function that buys nothing (its module already loads torch, or the
    target is light) hides a dependency and pays a dict lookup per call: at the top it goes."""
    assert {m.split(".")[1] for m in MODULES if m.count(".")} >= {"kernels", "oracles", "strategies"}
    unmarked = []
    for m, path in MODULES.items():
        unmarked += [
            f"{path.relative_to(ROOT)}:{line}: {text}"
            for line, text, marked in function_local_imports(path)
            if not marked
        ]
    assert not unmarked, (
        f"{len(unmarked)} function-local imports without '{LAZY_MARK} REASON' (move them to "
        "the top of the module):\n" + "\n".join(unmarked)
    )


def _optional_missing(stderr: str) -> bool:
    """A module of an adapter or oracle whose third-party library is not installed here."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return last.startswith("ModuleNotFoundError: No module named") and "'difftest" not in last


# One interpreter imports the third-party libraries the engine builds on (what any module's own
# ``import torch`` would load), checks that no difftest module is loaded, then forks a child per
# module: each child starts with no difftest module, as a fresh interpreter would, without paying
# torch's start-up (seconds) once per module.
_IMPORT_EACH_ALONE = """\
import importlib, json, os, sys, traceback
import hypothesis, numpy, torch  # noqa: F401
assert not [n for n in sys.modules if n == "difftest" or n.startswith("difftest.")]
for m in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(m)
            code, msg = 0, ""
        except BaseException as e:
            code, msg = 1, "".join(traceback.format_exception_only(e))
        os.write(w, msg.encode())
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    _, status = os.waitpid(pid, 0)
    print("imported-alone", json.dumps([m, os.waitstatus_to_exitcode(status), msg]), flush=True)
"""


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: another module that needs it needs
    it public (six such imports remained, from the reproducer reader, the gates, the
    runner and the TileLang adapter)."""
    crossing = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("difftest")):
                crossing += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.module} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not crossing, "\n".join(crossing)


def test_every_module_imports_alone():
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    runnable = [m for m in sorted(MODULES) if not m.endswith(".__main__")]  # importing it runs the CLI
    r = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_ALONE, *runnable],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # a module may print on import: only the driver's own lines are read
    results = [
        json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines() if line.startswith("imported-alone ")
    ]
    assert [m for m, _, _ in results] == runnable, r.stderr[-3000:]
    broken = [
        f"{m}:\n{err.strip().splitlines()[-1] if err.strip() else rc}"
        for m, rc, err in results
        if rc != 0 and not _optional_missing(err)
    ]
    assert not broken, "modules that fail to import alone:\n" + "\n".join(broken)


def _subcommands() -> list:
    from difftest.commands.cli import COMMANDS

    return list(COMMANDS)


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_builds_its_parser(name):
    from difftest.commands.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser([name, "--help"]).parse_args([name, "--help"])
    assert e.value.code == 0


# the modules of commands/ that are no subcommand: the dispatcher, the shared options, new-adapter's files
COMMAND_HELPERS = {
    "difftest.commands",
    "difftest.commands.cli",
    "difftest.commands.options",
    "difftest.commands.scaffold",
}


def test_every_front_lives_in_commands_one_module_per_subcommand():
    """A subcommand's ``add_arguments``/``command`` live in difftest/commands/<name>.py, and each
    module there is one subcommand (#45): measure/ and report/ hold what they measure and write,
    not argument parsing."""
    from difftest.commands.cli import SUBCOMMANDS

    fronts = {m for m in MODULES if m.startswith("difftest.commands")} - COMMAND_HELPERS
    assert fronts == {f"difftest.commands.{n.replace('-', '_')}" for n in SUBCOMMANDS}
    assert all(mod.__name__ == f"difftest.commands.{n.replace('-', '_')}" for n, mod in SUBCOMMANDS.items())
    outside = []
    for m, path in MODULES.items():
        if m.startswith(("difftest.commands.", "difftest.pytest_plugin")):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in ("add_arguments", "command"):
                outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not outside, f"command-line fronts outside difftest/commands/: {outside}"


def test_the_public_api_names_resolve():
    import difftest

    for name in difftest.__all__:
        assert getattr(difftest, name) is not None, name


def test_every_package_installs_through_the_one_mapping():
    """pyproject lists every package (difftest's own and kernels/, strategies/, oracles/ under
    difftest.*, through package-dir: the one install mechanism; difftest/__init__.py's
    __path__ line does the same for a source checkout), so an installed difftest lacks none."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    assert set(conf["packages"]) == packages
    assert conf["package-dir"] == {"difftest": "difftest", **{v: k for k, v in FOLDERS.items() if k != "difftest"}}
