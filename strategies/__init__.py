"""Hypothesis strategies over the attention problem space.

``problems(capability, profile)`` draws Problems inside a kernel's capability,
``edge_problems(capability)`` lists the classic corners every run covers first,
``compile_keys(problems, capability)`` counts distinct JIT configurations, and
``coverage`` classifies Problems into the bug-class features they exercise.
"""

from difftest.model.profiles import PROFILES, Profile, get_profile

from .compile import compile_keys
from .coverage import coverage_table, expected_features, features
from .edges import edge_problems
from .problems import problems

__all__ = [
    "problems",
    "edge_problems",
    "compile_keys",
    "features",
    "expected_features",
    "coverage_table",
    "PROFILES",
    "Profile",
    "get_profile",
]
