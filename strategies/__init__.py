"""Hypothesis strategies over the attention problem space."""

from .problems import problems

__all__ = ["problems"]
