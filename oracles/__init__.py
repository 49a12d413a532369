"""Trusted references: float64/float32 autograd, same-dtype, chunked, flash-style, FA3.

``references(inputs)`` is the one policy the engine (runner.run_case) judges kernels by:

- the truth is the float64 FlashAttention-formula oracle (``chunked.py``, checked against
  autograd and gradcheck in tests/test_oracles.py): memory-bounded at any length, faster
  than the autograd graph, and it records the term magnitudes the budget floor needs;
- the budget's yardstick is the larger error of the naive same-dtype autograd reference
  (``reference.py``, FlashAttention's yardstick) and the flash-style one (``flash_style.py``:
  rounds where a correct flash kernel rounds, chunked); above ``chunk_threshold`` score
  elements the naive one's dense graph would not fit, and it is computed in chunks of query
  rows (``rows_reference``): every row still sums its whole key sequence in one GEMM of the
  inputs' device, the order a correct plain attention on that device has (the sdpa math
  backend's float32 GEMMs over 1,458 near-equal terms on an H100 erred 4.3e-5 where the
  flash-style yardstick erred 1.6e-6: a correct kernel failed its budget);
- an FP8 Problem (difftest/model/fp8.py) has one yardstick, ``fp8_reference`` (``fp8.py``:
  quantises P, dS and every output where a correct FP8 kernel must, with float32
  accumulators); the naive and flash-style ones would round to no FP8 format at all. The
  truth is the float64 attention of the dequantised inputs, as for every dtype. A second
  correct FP8 design, the same yardstick with Hopper's FP8 tensor-core accumulator
  (``fp8_reference(..., "tensor-core")``), is ``more``: built only when a verdict fails
  against the first (it costs ~30 passes over each GEMM's products), then judged with both;
- a team's elementwise standard may be stated against another truth (``standard``,
  e.g. "float32"): autograd in that precision, dense up to ``chunk_threshold`` score
  elements and chunked above; the budget keeps the float64 truth.
"""

from collections.abc import Callable
from typing import NamedTuple

from difftest.errors import InputError
from difftest.execute.timing import phase  # the campaign's time split: truth / yardsticks
from difftest.model.fp8 import is_fp8
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from .approx_tanh import approximate_tanh_softcap
from .chunked import CHUNK_PRECISIONS, DEFAULT_MAX_CHUNK_ELEMENTS, chunk_rows, chunked_reference, rows_allowed
from .flash_style import flash_style_reference
from .fp8 import fp8_reference
from .prescaled_q import prescaled_q
from .reference import PRECISIONS, allowed_mask, reference, rows_reference
from .running_sum import input_dtype_running_sum

# Score elements (sum over sequences of seqlen_q x seqlen_k, times heads_q) above which
# the naive same-dtype reference is left out of the yardstick. Its dense graph keeps ~6
# score-sized tensors: 2**22 elements is about 200 MiB in float64.
DEFAULT_CHUNK_THRESHOLD = 2**22
TENSOR_CORE_NOTE = (
    "judged with the FP8 yardstick of float32 GEMMs and with the one of Hopper's FP8 tensor-core "
    "accumulator (oracles/tensor_core.py), the larger error of the two"
)


def score_elements(inputs_or_problem) -> int:
    """How many attention scores a problem has (what the dense reference materialises)."""
    p = getattr(inputs_or_problem, "problem", inputs_or_problem)
    return sum(a * b for a, b in zip(p.seqlens_q, p.seqlens_k)) * p.heads_q


class References(NamedTuple):
    truth: Outputs  # float64, with the term magnitudes the budget floor uses
    yardsticks: list  # same-dtype references; the budget takes the largest of their errors
    flash: Outputs  # the flash-style one among them (the dtype-limit rule of the gates reads it)
    note: str = ""  # what the judge should know about this choice ("" if nothing)
    standard: Outputs | None = None  # the elementwise standard's own truth (None: the float64 truth)
    # yardsticks of further correct designs, built only when a verdict fails against ``yardsticks``
    # (costly); the judge then takes the largest error of all of them. None: there are none.
    more: Callable[[], list] | None = None
    more_note: str = ""  # what the judge notes when it uses them


def references(inputs: Inputs, chunk_threshold: int | None = None, standard: str | None = None) -> References:
    """The truth and the yardsticks a kernel's outputs on ``inputs`` are judged by.
    ``chunk_threshold``: score elements above which the dense references are skipped
    (None: DEFAULT_CHUNK_THRESHOLD). ``standard``: the precision an elementwise standard
    is stated in ("float64" or None: the float64 truth itself; "float32")."""
    threshold = DEFAULT_CHUNK_THRESHOLD if chunk_threshold is None else chunk_threshold
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
        raise InputError(f"chunk_threshold={chunk_threshold!r}: allowed an int >= 0 or None")
    if standard is not None and standard not in CHUNK_PRECISIONS:
        raise InputError(f"standard={standard!r}: allowed {CHUNK_PRECISIONS} or None")

    dense = score_elements(inputs) <= threshold
    with phase("truth"):
        truth = chunked_reference(inputs, "float64", magnitudes=True)
    std = None
    if standard not in (None, "float64"):
        with phase("truth"):
            std = reference(inputs, standard) if dense else chunked_reference(inputs, standard)
    if is_fp8(inputs.problem.dtype):
        with phase("yardsticks"):
            yard = fp8_reference(inputs)

        def tensor_core():
            with phase("yardsticks"):
                return [fp8_reference(inputs, "tensor-core")]

        return References(truth, [yard], yard, standard=std, more=tensor_core, more_note=TENSOR_CORE_NOTE)
    with phase("yardsticks"):
        flash = flash_style_reference(inputs)
    with phase("yardsticks"):
        same = reference(inputs, "same") if dense else rows_reference(inputs, "same", threshold or 1)
    note = "" if dense else "long problem: the naive same-dtype yardstick computed in chunks of query rows"
    return References(truth, [same, flash], flash, note, std)


def design_yardsticks(designs, inputs: Inputs, block_m: int, flash: Outputs) -> list:
    """The yardsticks of the correct designs a kernel declares (``Capability.designs``), each
    built from the flash-style one ``flash`` where the design rounds as it does."""
    out = []
    for d in designs:
        if d == "input-dtype-running-sum":
            out.append(input_dtype_running_sum(inputs, block_m, flash))
        elif d == "prescaled-q":
            out.extend(prescaled_q(inputs))
        elif d == "approximate-tanh-softcap":
            if inputs.problem.softcap is not None:  # the design changes nothing without a cap
                out.extend(approximate_tanh_softcap(inputs))
        else:
            raise InputError(f"design {d!r}: no yardstick models it")
    return out


__all__ = [
    "CHUNK_PRECISIONS",
    "DEFAULT_CHUNK_THRESHOLD",
    "DEFAULT_MAX_CHUNK_ELEMENTS",
    "PRECISIONS",
    "References",
    "allowed_mask",
    "chunk_rows",
    "chunked_reference",
    "design_yardsticks",
    "flash_style_reference",
    "fp8_reference",
    "reference",
    "references",
    "rows_allowed",
    "rows_reference",
    "score_elements",
]
