"""The kernel registry: built-in names, 'module:attr' specs, third-party adapters found
through the difftest.kernels entry-point group, and clear errors."""

from importlib.metadata import EntryPoint

import pytest

from difftest.execute import adapter


def test_builtin_kernels_are_registered():
    names = adapter.names()
    for n in ("torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang", "tilelang-det", "fa3", "fa4"):
        assert n in names
    k = adapter.get("torch-blockwise")
    assert k.spec == "torch-blockwise" and adapter.get("torch-blockwise") is k


def test_third_party_adapter_through_entry_point(monkeypatch):
    ep = EntryPoint(name="their-kernel", value="tests.kernels_for_tests:RefKernel", group=adapter.ENTRY_POINT_GROUP)
    monkeypatch.setattr(adapter, "entry_points", lambda group: [ep] if group == adapter.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(adapter, "_REGISTRY", dict(adapter._REGISTRY))
    monkeypatch.setattr(adapter, "_LOADED_GROUPS", set())
    assert "their-kernel" in adapter.names()
    k = adapter.get("their-kernel")
    assert k.name == "test-ref32" and k.spec == "tests.kernels_for_tests:RefKernel"


def test_module_attr_spec():
    assert adapter.get("tests.kernels_for_tests:Flaky").name == "test-nondeterministic"


def test_unknown_names_are_clear_errors():
    with pytest.raises(KeyError, match="unknown kernel 'nope'.*torch-blockwise"):
        adapter.get("nope")
    with pytest.raises(KeyError, match="unknown mutant 'nope'"):
        adapter.get("mutant:nope")


def test_builtins_arrive_through_the_entry_point_group():
    """Our adapters are declared like a third party's: nothing registers them in code."""
    from importlib.metadata import entry_points

    declared = {ep.name: ep.value for ep in entry_points(group=adapter.ENTRY_POINT_GROUP)}
    assert declared["torch-blockwise"] == "difftest.kernels.blockwise:BlockwiseAttention"
    assert {"tilelang-det", "fa4", "sdpa-cpu-math"} <= set(declared)


def test_mutants_resolve_through_the_catalogue_prefix():
    cat = adapter.catalogue("mutant")
    name = sorted(cat.entries())[0]
    k = adapter.get(f"mutant:{name}")
    assert k.spec == f"mutant:{name}"
    assert not adapter.is_import_spec(f"mutant:{name}") and adapter.is_import_spec("tests.kernels_for_tests:Flaky")


def test_no_engine_module_imports_the_adapters_package():
    """The engine (difftest/) never imports kernels/: adapters arrive through the registry."""
    import ast
    from pathlib import Path

    engine = Path(adapter.__file__).parent
    offenders = []
    for path in engine.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom):
                mods = [("." * node.level) + (node.module or "")]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                mods = [node.args[0].value]
            for m in mods:
                if m.split(".")[0] == "kernels" or m.startswith(("difftest.kernels", ".kernels")):
                    offenders.append(f"{path.name}: {m}")
    assert offenders == []


def test_legacy_module_paths_still_resolve():
    """Reproducers written before the rename name modules as 'kernels.x:Attr'."""
    assert adapter.get("kernels.blockwise:BlockwiseAttention").name == "torch-blockwise"
