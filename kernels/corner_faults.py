"""``corner-faults``: a CPU stand-in for an FA4-like kernel with eight faults, each at one
corner of its configuration space, for measuring what one unattended campaign finds.

The interface is FA4's on SM90 (flash-attn-4's contract, kernels/fa4.py): float16 and
bfloat16, head_dim_qk and head_dim_v each 8..256 in steps of 8, GQA of any ratio, causal
masks and windows bottom-right aligned, varlen with empty sequences and unused tail tokens,
learnable sinks, every strided layout but a broadcast K/V. Sizes are bounded so a CPU runs
a nightly campaign in a minute (the float32 reference computes everything).

The faults, modelled on FlashAttention 4's fix history (each its own failure: an exception
of its own message, or a wrong output no other fault touches):

1. a head dim with a dtype: dQ 10% off in bfloat16 at head dims 40 and 48 (the SM90
   backward's head-dim rounding, wrong dQ at 40/48/72/80);
2. a GQA ratio with a head dim: no PackGQA tile for a ratio of 3 at head dim 88 (a build error);
3. a backward-only head-dim range: the backward does not fit shared memory at head dims
   136..184 (the forward runs);
4. mixed head dims: head_dim_v below head_dim_qk fails to legalize a copy (an MLIR error);
5. a mask alignment: with seqlen_q > seqlen_k the causal rows that see no key get O = 1
   instead of 0 (the diagonal taken top-left where it is bottom-right);
6. sinks with GQA: dSink summed once per query head of a group instead of once;
7. a window on long rows: dV 10% off with a left window once seqlen_k > 128 (a second key block);
8. an empty key sequence: the backward's launch fails on a varlen batch holding one.
"""

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.oracles.reference import reference

DIMS = tuple(range(8, 257, 8))


class BuildError(RuntimeError):
    """A kernel that does not build (shared memory, tiles)."""


class LegalizeError(RuntimeError):
    """An MLIR pass that cannot legalize an operation."""


class CornerFaults(KernelAdapter):
    name = "corner-faults"
    spec = "difftest.kernels.corner_faults:CornerFaults"
    capability = Capability(
        dtypes=("float16", "bfloat16"),
        head_dims_qk=DIMS,
        head_dims_v=DIMS,
        equal_head_dims=False,
        max_batch=3,
        max_seqlen=192,
        max_heads=12,
        gqa=True,
        causal=True,
        aligns=("bottom_right",),
        window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=True,
        outputs=("o", "lse", "dq", "dk", "dv", "dsink"),
        layouts=("contiguous", "do_transposed", "bhsd", "dim_slice", "offset", "misaligned"),
        block_m=64,
        block_n=128,
    )

    def forward(self, inputs, out=None):
        p = inputs.problem
        if p.head_dim_v < p.head_dim_qk:
            raise LegalizeError(
                f"failed to legalize operation 'cute.copy': head_dim_v={p.head_dim_v} below head_dim={p.head_dim_qk}"
            )
        if p.group == 3 and p.head_dim_qk == 88:
            raise BuildError(f"no PackGQA tile for qhead_per_kvhead={p.group} at head_dim={p.head_dim_qk}")
        res = reference(inputs, "float32")
        for q0, sq, sk in zip(p.cu_seqlens_q, p.seqlens_q, p.seqlens_k):
            if p.causal and sq > sk:  # rows before the bottom-right diagonal see no key
                res.o[q0 : q0 + sq - sk] = 1.0
        return res, None

    def backward(self, inputs, fwd, ctx, out=None):
        p = inputs.problem
        if 136 <= p.head_dim_qk <= 184:
            raise BuildError(f"backward kernel needs {p.head_dim_qk * 1664} bytes of shared memory, 232448 available")
        if p.varlen and 0 in p.seqlens_k:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        res = fwd.clone()
        dt = inputs.q.dtype
        for n in ("o", "dq", "dk", "dv"):
            setattr(res, n, getattr(res, n).to(dt))
        if p.dtype == "bfloat16" and p.head_dim_qk in (40, 48):
            res.dq = (res.dq.float() * 1.1).to(dt)
        if p.sinks and p.group > 1:
            res.dsink = res.dsink * p.group
        if p.window_left is not None and p.max_seqlen_k > 128:
            res.dv = (res.dv.float() * 1.1).to(dt)
        return res
