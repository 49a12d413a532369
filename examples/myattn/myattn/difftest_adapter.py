"""difftest adapter for myattn (docs/adapters.md in the difftest repository explains
every line). An adapter only translates between difftest's packed THD Inputs/Outputs
and the kernel's own calling convention; it never compares anything."""

from difftest import Capability, KernelAdapter, Outputs


class MyAttn(KernelAdapter):
    name = "myattn"
    description = "myattn: plain-torch varlen attention (example kernel)"
    # Only what the kernel really serves: every feature beyond the defaults is opted in.
    capability = Capability(
        dtypes=("float32", "float16", "bfloat16"),
        head_dims_qk=(16, 32, 64), equal_head_dims=False,  # head_dim_v may differ from head_dim_qk
        max_batch=4, max_seqlen=128, max_heads=8,
        gqa=True,  # heads_kv divides heads_q
        causal=True, aligns=("bottom_right",),  # FlashAttention's diagonal when seqlen_q != seqlen_k
        varlen=True, empty_seqs=True, pad_tail=True,  # cu_seqlens, zero-length sequences, unused tail rows
        poison=True,  # writes into the buffers it is given
        outputs=("o", "lse", "dq", "dk", "dv"),  # no sinks, so no dsink
    )

    def forward(self, inputs, out=None):
        from myattn import attention_forward

        p = inputs.problem
        o, lse = attention_forward(inputs.q, inputs.k, inputs.v, inputs.cu_seqlens_q, inputs.cu_seqlens_k,
                                   causal=p.causal, softmax_scale=p.scale,
                                   out=None if out is None else out.o, lse=None if out is None else out.lse)
        # ctx: whatever backward needs from forward; difftest only hands it back unchanged
        return Outputs(o=o, lse=lse), None

    def backward(self, inputs, fwd, ctx, out=None):
        from myattn import attention_backward

        p = inputs.problem
        dq, dk, dv = attention_backward(inputs.do, inputs.q, inputs.k, inputs.v, fwd.o, fwd.lse,
                                        inputs.cu_seqlens_q, inputs.cu_seqlens_k, causal=p.causal,
                                        softmax_scale=p.scale,
                                        dq=None if out is None else out.dq, dk=None if out is None else out.dk,
                                        dv=None if out is None else out.dv)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv)
