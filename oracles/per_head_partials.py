"""Per-query-head dK and dV of a GQA/MQA problem (float64): what a kernel run on expanded
or stride-0 K/V (an MHA kernel under GQA, torch SDPA's efficient/flash backends on a
broadcast layout, FlashAttention 2's GQA backward) computes and STORES in the input dtype
before it sums each group.

A partial can lie beyond the dtype's range (fp16: 65504) where the group's sum does not
(the heads' terms cancel), and such a kernel then holds an infinity there: correct in its
dtype, which the gates accept where a partial reaches the overflow threshold
(``gates.dtype_limited``, rule (d)). Computed as the float64 truth of the same problem with
every query head given its own copy of its K/V head (an MHA problem): its dK and dV are
the partials, [total_k, heads_q, dim]. Only asked for when a kernel's dK or dV holds a
non-finite or saturated value where the truth is finite, so it costs nothing otherwise.
"""

from difftest.model.inputs import Inputs
from difftest.model.layouts import CONTIGUOUS

from .chunked import chunked_reference


def per_head_partials(inputs: Inputs) -> dict:
    """{"dk": [total_k, heads_q, head_dim_qk], "dv": [total_k, heads_q, head_dim_v]} in
    float64: each query head's share of dK and dV before its group's sum."""
    p = inputs.problem
    g = p.group
    mha = Inputs(
        problem=p.replace(heads_kv=p.heads_q, layout=CONTIGUOUS),
        q=inputs.q,
        k=inputs.k.repeat_interleave(g, dim=1),
        v=inputs.v.repeat_interleave(g, dim=1),
        do=inputs.do,
        sink=inputs.sink,
        cu_seqlens_q=inputs.cu_seqlens_q,
        cu_seqlens_k=inputs.cu_seqlens_k,
    )
    out = chunked_reference(mha, "float64")
    return {"dk": out.dk, "dv": out.dv}


__all__ = ["per_head_partials"]
