"""Hypothesis strategies over the attention problem space."""
