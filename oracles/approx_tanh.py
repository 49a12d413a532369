"""The yardstick of a correct design that caps the logits with the GPU's approximate tanh.

FlashAttention 4 caps logits with ``cute.math.tanh(x, fastmath=True)``, PTX ``tanh.approx.f32``
(MUFU.TANH): relative error up to 2^-11 (PTX ISA, tanh), and its backward takes 1 - t^2 from the
same approximate t. A capped logit near the cap is then off by up to softcap * 2^-11: at a cap
of 30, 0.015, more than a bfloat16 P's rounding, and 2^13 times float32's. The correct-variant
catalogue's ``softcap-approx-tanh`` failed the budget gates 9 times in 1,422 CPU cases
(float32 ratios up to 373, bfloat16 dK 1.33, float16 dQ 2.85) with no yardstick for it.

``approx_tanh(x)``: float32 tanh with its 12 low mantissa bits cut (an error of the bound's
size at every element, toward zero: the worst a correct design can do everywhere at once; the
catalogue's variant). ``approximate_tanh_softcap(inputs)``: every output by the same-dtype
dense formula with the logits capped by a tanh of twice that error (13 bits cut), once toward
zero and once away from it, and the backward's factor 1 - t^2 from the same t. Twice: at the
bound itself the yardstick erred as the variant did to within their roundings, and a budget of
k = 1 times it failed 3 of 3,071 CPU cases by up to 1.31 (a kernel's own rounding adds to its
tanh's error, and its per-element errors need not lean the yardstick's way). With both
directions at twice the bound the variant still failed 4 of 5,106 CPU cases (bfloat16 dK 1.97,
float32 dQ 1.32, and bfloat16 O 2.01 at a cap of 1000 on outlier-channel values scaled by 256,
where a capped logit's error reaches cap * 2^-11 = 0.5): a floor that propagates the tanh's
bound through the softmax is what would close it, not done. A kernel declares the design
(``Capability.designs``); the judge builds this yardstick only when a budget gate fails.
"""

import torch

from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from .reference import reference

F32 = torch.float32
BOUND_BITS = 12  # float32 mantissa bits cut: 11 fraction bits kept, an error below 2^-11 (the PTX bound)
YARDSTICK_BITS = 13  # the yardstick's: twice the bound (module docstring)


def approx_tanh(x: torch.Tensor, bits: int = BOUND_BITS, away: bool = False) -> torch.Tensor:
    """tanh as the special-function unit gives it, at its error bound, in float32: toward zero
    (``away``: away from zero); ``bits``: the low mantissa bits cut (the error below 2^-(23 - bits))."""
    t = torch.tanh(x.to(F32)).contiguous().view(torch.int32)
    low = (1 << bits) - 1
    return ((t + low if away else t) & ~low).view(F32)


class _ApproxTanh(torch.autograd.Function):
    """approx_tanh, with the derivative 1 - t^2 from the approximate t (as the design's backward)."""

    @staticmethod
    def forward(ctx, x, away):
        t = approx_tanh(x, YARDSTICK_BITS, away).to(x.dtype)
        ctx.save_for_backward(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return grad * (1 - t * t), None


def approximate_tanh_softcap(inputs: Inputs) -> list[Outputs]:
    """The same-dtype dense outputs of ``inputs`` with the logits capped by the approximate tanh,
    its error toward zero and away from it: two yardsticks (the budget takes the larger error)."""
    return [reference(inputs, "same", tanh=lambda x, a=away: _ApproxTanh.apply(x, a)) for away in (False, True)]
