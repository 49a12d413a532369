"""difftest: property-based differential testing of attention backward kernels."""

from .adapter import KernelAdapter, KernelUnavailable, register
from .capability import Capability
from .inputs import Inputs, make_inputs
from .outputs import Outputs
from .problem import Problem, ProblemError

__all__ = ["Capability", "Inputs", "KernelAdapter", "KernelUnavailable", "Outputs", "Problem",
           "ProblemError", "make_inputs", "register"]
__version__ = "0.1.0"
