"""Trusted references: float64/float32 autograd, same-dtype, chunked, FA3.

``truth(inputs)`` is what the engine compares kernels against: the dense autograd
reference for small problems, the memory-bounded chunked one above a size threshold.
"""

from difftest.inputs import Inputs
from difftest.outputs import Outputs

from .chunked import CHUNK_PRECISIONS, DEFAULT_MAX_CHUNK_ELEMENTS, chunk_rows, chunked_reference, rows_allowed
from .reference import PRECISIONS, allowed_mask, reference

# Score elements (sum over sequences of seqlen_q x seqlen_k, times heads_q) above which
# truth() switches to the chunked oracle. The dense float64 graph keeps ~6 score-sized
# tensors (~48 bytes per element): 2**22 elements is about 200 MiB.
DEFAULT_CHUNK_THRESHOLD = 2**22


def score_elements(inputs_or_problem) -> int:
    """How many attention scores a problem has (what the dense reference materialises)."""
    p = getattr(inputs_or_problem, "problem", inputs_or_problem)
    return sum(a * b for a, b in zip(p.seqlens_q, p.seqlens_k)) * p.heads_q


def truth(inputs: Inputs, precision: str = "float64", chunk_threshold: int = DEFAULT_CHUNK_THRESHOLD) -> Outputs:
    """The reference outputs in ``precision`` ("float64" or "float32"): dense autograd when
    the problem has at most ``chunk_threshold`` score elements, chunked above it."""
    if precision not in CHUNK_PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed {CHUNK_PRECISIONS} (use reference() for 'same')")
    if not isinstance(chunk_threshold, int) or chunk_threshold < 0:
        raise ValueError(f"chunk_threshold={chunk_threshold!r}: allowed an int >= 0")
    if score_elements(inputs) > chunk_threshold:
        return chunked_reference(inputs, precision)
    return reference(inputs, precision)


__all__ = ["CHUNK_PRECISIONS", "DEFAULT_CHUNK_THRESHOLD", "DEFAULT_MAX_CHUNK_ELEMENTS", "PRECISIONS",
           "allowed_mask", "chunk_rows", "chunked_reference", "reference", "rows_allowed", "score_elements",
           "truth"]
