"""difftest: property-based differential testing of attention backward kernels.

The repository keeps the design card's layout: ``difftest/`` (the engine) beside
``kernels/``, ``strategies/`` and ``oracles/``. They are one distribution with one
top-level import name: installed, setuptools' package-dir mapping puts them under
``difftest.kernels``, ``difftest.strategies`` and ``difftest.oracles``; in a source
checkout (or an editable install) the same names resolve to the sibling folders through
``__path__`` below. Nothing else is added to the import path.
"""

import os as _os

_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "kernels")) and all(
        _os.path.isfile(_os.path.join(_ROOT, d, "__init__.py")) for d in ("kernels", "strategies", "oracles")):
    __path__.append(_ROOT)  # noqa: F821 -- a package's own __path__

# Top-level names load on first use (PEP 562): ``import difftest.commands.cli`` and ``difftest
# --help`` must not pay for torch (seconds) before a subcommand needs it.
_EXPORTS = {"KernelAdapter": "execute.adapter", "KernelUnavailable": "execute.adapter",
            "register": "execute.adapter", "Capability": "model.capability", "Inputs": "model.inputs",
            "make_inputs": "model.inputs", "Outputs": "model.outputs", "Problem": "model.problem",
            "ProblemError": "model.problem", "capture": "model.capture"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'difftest' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"
