"""The kernel adapter protocol and the registry of kernels.

An adapter only translates: it takes a Problem's Inputs (packed THD, see inputs.py),
calls the production kernel's forward and backward, and returns Outputs in difftest's
layout. It never compares. Third-party packages register adapters through the
``difftest.kernels`` entry-point group (value: a zero-argument callable returning an
adapter, or an adapter class).
"""

import copy
import difflib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from difftest.errors import InputError
from difftest.model.capability import Capability

if TYPE_CHECKING:  # annotations only: the registry (``difftest list``) must not import torch
    from difftest.model.inputs import Inputs
    from difftest.model.outputs import Outputs

ENTRY_POINT_GROUP = "difftest.kernels"
CATALOGUE_GROUP = "difftest.catalogues"
# The one translation of names written before a move: reproducers, failure stores and
# command lines from before kernels/, strategies/ and oracles/ installed as difftest.kernels,
# difftest.strategies and difftest.oracles name them as top-level packages ("kernels.x:Y").
# Read only where a 'module:attr' spec is imported (``_import_attr``).
MOVED_PACKAGES = {"kernels": "difftest.kernels", "strategies": "difftest.strategies", "oracles": "difftest.oracles"}


def current_module(mod: str) -> str:
    """``mod`` as it is importable now: a module of a package that moved, under its new name."""
    top, dot, rest = mod.partition(".")
    return MOVED_PACKAGES[top] + dot + rest if top in MOVED_PACKAGES else mod


class KernelUnavailable(RuntimeError):
    """The kernel's package or device is missing here; campaigns skip it with this reason."""


class KernelAdapter:
    """Subclass and set ``name`` and ``capability``; implement ``forward`` and ``backward``."""

    name: str = "unnamed"
    spec: str | None = None  # registry name that rebuilds this adapter (set by get())
    capability: Capability = Capability()
    description: str = ""
    narrowed: dict[str, object]  # only on a copy made by narrow(): the changes (Capability.narrowed)

    def available(self) -> str | None:
        """None when the kernel can run here, else the reason it cannot."""
        return None

    def forward(self, inputs: "Inputs", out: "Outputs | None" = None) -> "tuple[Outputs, Any]":
        """Return (Outputs with o and lse, ctx). ``out`` holds poisoned buffers when the
        capability sets ``poison``; write into them when given."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, inputs: "Inputs", fwd: "Outputs", ctx: Any, out: "Outputs | None" = None) -> "Outputs":
        """Return Outputs with dq, dk, dv (and dsink); o/lse copied from ``fwd``."""
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def run(self, inputs: "Inputs", out: "Outputs | None" = None) -> "Outputs":
        fwd, ctx = self.forward(inputs, out)
        return self.backward(inputs, fwd, ctx, out)

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


def narrow(kernel: KernelAdapter, **changes: Any) -> KernelAdapter:
    """A copy of ``kernel`` whose capability covers less (``Capability.narrowed``); the
    campaign records ``narrowed`` in its report. The copy shares the kernel's state."""
    if not changes:
        return kernel
    k = copy.copy(kernel)
    k.capability = kernel.capability.narrowed(**changes)
    k.narrowed = {**getattr(kernel, "narrowed", {}), **changes}
    return k


_REGISTRY: dict[str, object] = {}  # name -> adapter instance, factory, or "module:attr" path
_CATALOGUES: dict[str, object] = {}  # prefix -> catalogue (entries() -> {name: entry with .factory})
_LOADED_GROUPS: set[str] = set()
_IMPORT_SPECS: set[str] = set()  # names that resolved as 'module:attr' imports


class KernelSpecError(InputError, KeyError):
    """A kernel name or ``module:attr`` spec that does not resolve; the message is one line."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def register(name: str, factory: object) -> None:
    """Register an adapter under ``name``: an instance, a zero-arg factory, or 'module:attr'."""
    _REGISTRY[name] = factory


def register_catalogue(prefix: str, catalogue: object) -> None:
    """Serve ``prefix:NAME`` from ``catalogue``, an object whose ``entries()`` maps names to
    entries with a zero-argument ``factory`` (the mutant catalogue registers ``mutant``)."""
    _CATALOGUES[prefix] = catalogue


def _load_entry_points() -> None:
    if ENTRY_POINT_GROUP not in _LOADED_GROUPS:
        _LOADED_GROUPS.add(ENTRY_POINT_GROUP)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _REGISTRY.setdefault(ep.name, ep.value)


def catalogue(prefix: str) -> Any:
    """The catalogue registered under ``prefix`` (entry-point group ``difftest.catalogues``)."""
    if CATALOGUE_GROUP not in _LOADED_GROUPS:
        _LOADED_GROUPS.add(CATALOGUE_GROUP)
        for ep in entry_points(group=CATALOGUE_GROUP):
            _CATALOGUES.setdefault(ep.name, ep.value)
    if prefix not in _CATALOGUES:
        raise KernelSpecError(f"no catalogue serves {prefix!r}: known prefixes are {sorted(_CATALOGUES)}")
    c = _CATALOGUES[prefix]
    if isinstance(c, str):
        c = _CATALOGUES[prefix] = _import_attr(c, f"catalogue {prefix!r}")
    return c


def names() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)


def describe(name: str) -> str:
    """Where kernel ``name`` comes from ('module:attr'), without importing it."""
    _load_entry_points()
    f = _REGISTRY.get(name)
    if isinstance(f, str):
        return f
    obj = type(f) if isinstance(f, KernelAdapter) else f
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__name__)}"


def _import_module(mod: str) -> Any:
    """``mod`` imported; only if it is found nowhere else, from the current directory (`-k
    mymodule:MyAdapter` finds modules there, as ``python -m`` does), loaded from there
    WITHOUT putting the current directory on sys.path: a folder there named like an
    installed package (a ``difftest/`` checkout beside the user's files) would otherwise be
    taken, in every spawned worker, for an empty namespace package (``from difftest import
    Capability`` an ImportError in every case)."""
    try:
        return importlib.import_module(mod)
    except ModuleNotFoundError as e:
        top = mod.split(".")[0]
        spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) if e.name == top else None
        if spec is None or spec.origin is None or spec.loader is None:  # none there, or only a bare folder
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(top, None)
            raise
        return importlib.import_module(mod)


def _import_attr(path: str, what: str) -> Any:
    mod, _, attr = path.partition(":")
    mod = current_module(mod)
    if not mod or not attr:
        raise KernelSpecError(f"{what}: {path!r} is not a 'module:attr' path")
    try:
        module = _import_module(mod)
    except ModuleNotFoundError as e:
        hint = "" if e.name != mod.split(".")[0] else " (is it installed, or on PYTHONPATH / in the current directory?)"
        raise KernelSpecError(f"{what}: cannot import module {e.name!r}{hint}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise KernelSpecError(f"{what}: module {mod!r} has no attribute {attr!r}") from None


def is_import_spec(name: str) -> bool:
    """True for a spec that imports code: a 'module:attr' path, or ``prefix:NAME`` of a
    catalogue that declares ``imports_code`` (``tilelang-file:/path/kernel.py`` runs that
    file); False for a registry name or an entry of a catalogue of built-in kernels."""
    _load_entry_points()
    if name in _IMPORT_SPECS:
        return True
    if ":" in name:
        try:
            return bool(getattr(catalogue(name.split(":", 1)[0]), "imports_code", False))
        except KernelSpecError:
            pass
    return name not in _REGISTRY and ":" in name


def get(name: str) -> KernelAdapter:
    """The adapter registered as ``name`` (a registry name, ``prefix:NAME`` served by a
    catalogue, or a ``module:attr`` path); a clear one-line error lists the known names."""
    _load_entry_points()
    if name not in _REGISTRY and ":" in name:
        prefix, _, entry = name.partition(":")
        try:
            cat = catalogue(prefix)
        except KernelSpecError:
            cat = None
        if cat is not None:
            entries = cat.entries()
            if entry not in entries:
                raise KernelSpecError(f"unknown {prefix} {entry!r}: known are {sorted(entries)}")
            _REGISTRY[name] = entries[entry].factory
        else:
            _REGISTRY[name] = name  # a 'module:attr' path, e.g. an adapter in the user's own test suite
            _IMPORT_SPECS.add(name)
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        # names without quotes: the list stays inside one_line's ONE_LINE_CHARS as kernels are added
        raise KernelSpecError(f"unknown kernel {name!r}{hint}: known kernels are {', '.join(sorted(_REGISTRY))}")
    f = _REGISTRY[name]
    if isinstance(f, str):
        try:
            f = _import_attr(f, f"kernel {name!r}")
        except KernelSpecError:
            _REGISTRY.pop(name, None) if f == name else None
            raise
    if isinstance(f, KernelAdapter):
        return f
    if not callable(f):
        raise KernelSpecError(f"kernel {name!r} is a {type(f).__name__}: allowed a KernelAdapter or a factory of one")
    try:
        adapter = f()
    except TypeError as e:
        raise KernelSpecError(
            f"kernel {name!r}: its factory cannot be called without arguments ({e}): allowed "
            "a KernelAdapter class or a zero-argument factory"
        ) from None
    if not isinstance(adapter, KernelAdapter):
        raise KernelSpecError(
            f"kernel {name!r} factory returned {type(adapter).__name__}, not a KernelAdapter: "
            "allowed a 'module:attr' naming a KernelAdapter class or a factory of one"
        )
    if getattr(adapter, "spec", None) is None:
        adapter.spec = name  # how a worker process or a reproducer gets the same kernel back
    _REGISTRY[name] = adapter
    return adapter
