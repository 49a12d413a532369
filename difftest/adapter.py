"""The kernel adapter protocol and the registry of kernels.

An adapter only translates: it takes a Problem's Inputs (packed THD, see inputs.py),
calls the production kernel's forward and backward, and returns Outputs in difftest's
layout. It never compares. Third-party packages register adapters through the
``difftest.kernels`` entry-point group (value: a zero-argument callable returning an
adapter, or an adapter class).
"""

import copy
import importlib
from importlib.metadata import entry_points

from .capability import Capability
from .inputs import Inputs
from .outputs import Outputs
from .problem import Problem

ENTRY_POINT_GROUP = "difftest.kernels"


class KernelUnavailable(RuntimeError):
    """The kernel's package or device is missing here; campaigns skip it with this reason."""


class KernelAdapter:
    """Subclass and set ``name`` and ``capability``; implement ``forward`` and ``backward``."""

    name: str = "unnamed"
    spec: str | None = None  # registry name that rebuilds this adapter (set by get())
    capability: Capability = Capability()
    description: str = ""

    def available(self) -> str | None:
        """None when the kernel can run here, else the reason it cannot."""
        return None

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        """Return (Outputs with o and lse, ctx). ``out`` holds poisoned buffers when the
        capability sets ``poison``; write into them when given."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        """Return Outputs with dq, dk, dv (and dsink); o/lse copied from ``fwd``."""
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def run(self, inputs: Inputs, out: Outputs | None = None) -> Outputs:
        fwd, ctx = self.forward(inputs, out)
        return self.backward(inputs, fwd, ctx, out)

    def __repr__(self):
        return f"<kernel {self.name}>"


def narrow(kernel: KernelAdapter, **changes) -> KernelAdapter:
    """A copy of ``kernel`` whose capability covers less (``Capability.narrowed``); the
    campaign records ``narrowed`` in its report. The copy shares the kernel's state."""
    if not changes:
        return kernel
    k = copy.copy(kernel)
    k.capability = kernel.capability.narrowed(**changes)
    k.narrowed = {**getattr(kernel, "narrowed", {}), **changes}
    return k


_REGISTRY: dict[str, object] = {}  # name -> adapter instance, factory, or "module:attr" path


def register(name: str, factory) -> None:
    """Register an adapter under ``name``: an instance, a zero-arg factory, or 'module:attr'."""
    _REGISTRY[name] = factory


def _load_entry_points() -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _REGISTRY.setdefault(ep.name, ep.value)


def names() -> list[str]:
    _load_builtin()
    _load_entry_points()
    return sorted(_REGISTRY)


def get(name: str) -> KernelAdapter:
    """The adapter registered as ``name``; a clear error lists the known names."""
    _load_builtin()
    _load_entry_points()
    if name.startswith("mutant:") and name not in _REGISTRY:
        from kernels.mutants import all_mutants  # the fault-injected kernels of the catalogue

        catalogue = all_mutants()
        mname = name.split(":", 1)[1]
        if mname not in catalogue:
            raise KeyError(f"unknown mutant {mname!r}: known mutants are {sorted(catalogue)}")
        _REGISTRY.setdefault(name, catalogue[mname].factory)
    if name not in _REGISTRY and ":" in name and not name.startswith("mutant:"):
        _REGISTRY[name] = name  # a 'module:attr' path, e.g. an adapter in the user's own test suite
    if name not in _REGISTRY:
        raise KeyError(f"unknown kernel {name!r}: known kernels are {sorted(_REGISTRY)}")
    f = _REGISTRY[name]
    if isinstance(f, str):
        mod, _, attr = f.partition(":")
        f = getattr(importlib.import_module(mod), attr)
    if isinstance(f, KernelAdapter):
        return f
    adapter = f()
    if not isinstance(adapter, KernelAdapter):
        raise TypeError(f"kernel {name!r} factory returned {type(adapter).__name__}, not a KernelAdapter")
    if getattr(adapter, "spec", None) is None:
        adapter.spec = name  # how a worker process or a reproducer gets the same kernel back
    _REGISTRY[name] = adapter
    return adapter


_BUILTIN_LOADED = False


def _load_builtin() -> None:
    """Our own adapters register themselves in kernels/registry.py (lazy imports only)."""
    global _BUILTIN_LOADED
    if not _BUILTIN_LOADED:
        _BUILTIN_LOADED = True
        importlib.import_module("kernels.registry")
