"""difftest: property-based differential testing of attention backward kernels.

The repository keeps the design card's layout: ``difftest/`` (the engine) beside
``kernels/``, ``strategies/`` and ``oracles/``. They are one distribution with one
top-level import name: installed, setuptools' package-dir mapping puts them under
``difftest.kernels``, ``difftest.strategies`` and ``difftest.oracles``; in a source
checkout (or an editable install) the same names resolve to the sibling folders through
``__path__`` below. Nothing else is added to the import path. Module paths recorded
before this layout (a reproducer's ``kernels.x:Y``) are translated in one place,
``difftest.execute.adapter.current_module``.
"""

import importlib as _importlib
import os as _os
from typing import Any as _Any

_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "kernels")) and all(
    _os.path.isfile(_os.path.join(_ROOT, d, "__init__.py")) for d in ("kernels", "strategies", "oracles")
):
    __path__.append(_ROOT)  # noqa: F821 -- a package's own __path__

# The public API: what adapters, reproducers and users' own tests import (``from difftest
# import ...``); the engine's modules below it may move. Names load on first use (PEP 562):
# ``import difftest.commands.cli`` and ``difftest --help`` must not pay for torch (seconds)
# before a subcommand needs it.
_EXPORTS = {
    # writing an adapter
    "KernelAdapter": "execute.adapter",
    "KernelUnavailable": "execute.adapter",
    "register": "execute.adapter",
    "Capability": "model.capability",
    "Inputs": "model.inputs",
    "make_inputs": "model.inputs",
    "Outputs": "model.outputs",
    "Problem": "model.problem",
    "ProblemError": "model.problem",
    # the registry: a kernel by name (registry name, "prefix:NAME", "module:attr"), the names known
    "get_kernel": ("execute.adapter", "get"),
    "kernel_names": ("execute.adapter", "names"),
    # one case and its verdicts (reproducers; a user's own @given tests)
    "run_case": "judge.runner",
    "RunConfig": "judge.runner",
    "CaseResult": "judge.runner",
    "GateConfig": "judge.gates",
    "Standard": "judge.gates",
    "Verdict": "judge.gates",
    # Hypothesis strategies: ``problems(capability, profile)`` draws Problems a kernel serves
    "problems": ("strategies", "problems"),
    "get_profile": "model.profiles",
    # whole campaigns
    "run_campaign": "search.campaign",
    "CampaignResult": "search.campaign",
    # recording a model's attention inputs for ``difftest run --values-from`` (docs/values.md)
    "capture": "model.capture",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _Any:
    if name in _EXPORTS:
        module, attr = _EXPORTS[name] if isinstance(_EXPORTS[name], tuple) else (_EXPORTS[name], name)
        value = getattr(_importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'difftest' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"
