"""A same-dtype reference that rounds where a correct flash kernel rounds.

The naive same-dtype reference (autograd of softmax(QK^T)V in the Problem's dtype) is
FlashAttention's yardstick, but it does not round where a flash kernel must: a flash
backward takes Delta = rowsum(O * dO) from the *stored, rounded* O, feeds P and dS to
the tensor cores in the input dtype, and accumulates in float32. With a saturated
softmax (large logits) those rounding points make a correct kernel's dQ/dK error far
larger than the naive reference's, so the error budget uses the larger of the two
references' errors. Float32 problems round nowhere extra, as on the GPU's FP32 path.

It is the chunked oracle (oracles/chunked.py) computed in float32 with
``flash_rounding``, so it fits in memory at any length: long problems, where the naive
reference's dense graph does not fit, keep the same yardstick.
"""

from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from .chunked import chunked_reference


def flash_style_reference(inputs: Inputs) -> Outputs:
    """O, LSE, dQ, dK, dV (and dSink) rounded where a correct flash kernel rounds."""
    return chunked_reference(inputs, "float32", flash_rounding=True)
