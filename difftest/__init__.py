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

from .adapter import KernelAdapter, KernelUnavailable, register
from .capability import Capability
from .inputs import Inputs, make_inputs
from .outputs import Outputs
from .problem import Problem, ProblemError

__all__ = ["Capability", "Inputs", "KernelAdapter", "KernelUnavailable", "Outputs", "Problem",
           "ProblemError", "make_inputs", "register"]
__version__ = "0.1.0"
