"""The kernel registry: built-in names, 'module:attr' specs, third-party adapters found
through the difftest.kernels entry-point group, and clear errors."""

from importlib.metadata import EntryPoint

import pytest

from difftest import adapter


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
