"""FlashAttention 3 (Hopper) backward: ``flash_attn_interface`` when installed, otherwise
the FA3 Hopper kernels packaged in ``dew_flash_attn`` (XLA FFI targets under JAX).

dew path: our torch tensors are handed to JAX through DLPack (no copies), the kernels run
under ``jax.jit``, and the results come back through DLPack. We call dew's own
forward/backward pair (``_attend_forward`` / ``_attend_backward``, the custom_vjp behind
its public ``flash_mha``/``flash_mha_varlen``) because the public functions do not return
the LSE. In dew, sinks are not inside the FA3 kernel: dew rescales the kernel's output by
the sink's share and computes dSink in JAX from the kernel's LSE; the FA3 backward kernel
then runs with the sink folded into the LSE. ``backend`` in the description says which
path ran.

Conventions converted here: FA3's LSE is natural-log, [B, H, S] dense or [H, T] varlen,
+inf for a row that sees no key (turned into -inf); masks are bottom-right aligned;
window side -1 = unbounded.
"""

import os
from dataclasses import dataclass

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import (
    cuda_reason,
    fold_kv_heads,
    laid_out,
    laid_out_leaf,
    lse_bhs_to_thd,
    lse_ht_to_thd,
    module_reason,
    normalize_lse,
    sm_reason,
    thd,
)

# The contract, as each backend's own code states it (read for this capability, not inferred
# from runs):
# - dew (dew-flash-attn-cu13 0.3.6, dew_flash_attn/__init__.py; what the H200 runs): the
#   public flash_mha / flash_mha_varlen take bf16/fp16 of one dtype (:296-298), q/k/v of one
#   width, key heads dividing the query's, heads up to 256 wide (:302-308), one sink a query
#   head (:309-310); any width up to 256 is accepted because _forward3/_backward3 pad the last
#   axis to a multiple of 8 (:84-87) before FA3's C++ (whose own checks are head_size % 8 and
#   <= 256: flash_api.cpp mha_bwd in the flash-attention commit below). So every head dim
#   1..256, equal for q/k and v. Explicit exclusions, from dew's own text: head_dim_v !=
#   head_dim_qk (`query.shape[-1] != key.shape[-1]` with `key.shape != value.shape`,
#   :302-304); unused tail tokens, because flash_mha_varlen's offsets run "from 0 to T"
#   (:330) -- the H200 campaign found why it matters: dew's JAX dSink sums the kernel's
#   LSE/O over every packed row, tail rows included, and returned NaN dSink. Empty sequences
#   are documented ("a sequence may be empty", :331); dense seqlen_q != seqlen_k is not
#   checked (:302-305), varlen keys take their own offsets (key_cu_seqlens, :326-345); window
#   (-1 unbounded) and causal bottom-right (the
#   flash_mha docstring, :315-318); any softmax scale. The adapter runs dew's _check on every
#   call (the public functions' validation) before the custom_vjp pair behind them.
# - interface (flash_attn_interface, FlashAttention's hopper/, __init__ 3.0.0, read at
#   Dao-AILab/flash-attention commit 0251105a2fb19d2957484b7f023cd8c115286ced; not in the
#   device bundle): mha_bwd takes fp16/bf16 (flash_api.cpp:1301-1302), head_size and
#   head_size_v multiples of 8 with max(head_size, head_size_v) <= 256 (:1349-1352), GQA with
#   num_heads % num_heads_k == 0 (:1353). Explicit exclusion: head_dim_v != head_dim_qk, which
#   mha_fwd takes only for Q/K in (128, 192] with V in (96, 128], or Q/K <= 64 (:782-788), a
#   paired rule a Capability (independent head-dim sets) cannot state; declaring the sets
#   independently would draw pairs the interface refuses up front.
# - max_seqlen / max_heads / max_batch below are campaign bounds (GPU time), not FA3's.
_DEW_DIMS = tuple(range(1, 257))
_INTERFACE_DIMS = tuple(range(8, 257, 8))


# Memory layouts: the FlashAttention C++ APIs check only that q/k/v have a contiguous last
# dimension (`TORCH_CHECK(q.stride(-1) == 1, ...)`, flash_api.cpp:1311-1315 in mha_bwd, and
# the Python wrappers' maybe_contiguous copies only when stride(-1) != 1); every layout of
# difftest/model/layouts.py has it, so the interface backend is handed the laid-out memory. dew
# takes JAX arrays, which have no strides: the adapter must copy into a contiguous buffer for
# DLPack, so under dew only the contiguous layout is declared (another layout would test our
# copy, not the kernel).
def _capability(backend: str) -> Capability:
    return Capability(
        dtypes=("float16", "bfloat16"),
        head_dims_qk=_DEW_DIMS if backend == "dew" else _INTERFACE_DIMS,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=8192,
        max_heads=32,
        gqa=True,
        causal=True,
        aligns=("bottom_right",),
        window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=backend == "interface",
        sinks=backend == "dew",
        outputs=("o", "lse", "dq", "dk", "dv", "dsink"),
        deterministic=False,
        device="cuda",
        block_m=64,
        block_n=128,
        layouts=LAYOUTS if backend == "interface" else ("contiguous",),
    )


@dataclass(frozen=True)
class Fa3Call:
    """Arguments FA3 gets for a Problem (testable without a GPU)."""

    causal: bool
    window: tuple[int, int]  # FlashAttention's (left, right), -1 = unbounded
    scale: float
    longest: tuple[int, int] | None  # varlen: (max_seqlen_q, max_seqlen_k)

    @staticmethod
    def of(p: Problem) -> "Fa3Call":
        if p.masked and p.align != "bottom_right" and p.seqlens_q != p.seqlens_k:
            raise ValueError(f"FA3 masks are bottom-right aligned; Problem.align={p.align!r}")
        w = (-1 if p.window_left is None else p.window_left, -1 if p.window_right is None else p.window_right)
        # max_seqlen is an upper bound; FA3 reads 0 as "not provided" and aborts
        # (H200 campaign: every sequence empty), so the bound is at least 1.
        longest = (max(1, p.max_seqlen_q), max(1, p.max_seqlen_k)) if p.varlen else None
        return Fa3Call(causal=p.causal, window=w, scale=float(p.scale), longest=longest)


def pick_backend() -> str | None:
    """'interface' (flash_attn_interface), 'dew' (dew_flash_attn), or None."""
    if module_reason("flash_attn_interface") is None:
        return "interface"
    if module_reason("dew_flash_attn") is None and module_reason("jax") is None:
        return "dew"
    return None


_JITTED = {}


def _dew_fns():
    """dew's forward/backward pair under jax.jit (compiled once per static config)."""
    if not _JITTED:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before JAX's first import
        # lazy: JAX and dew-flash-attn are optional; the adapter loads and says so without them
        import dew_flash_attn as dew
        import jax

        def backward(longest, scale, causal, window, residuals, grad):
            # dew's vjp also returns float0 cotangents for the offsets: not jit outputs we need
            return dew._attend_backward(longest, scale, causal, window, residuals, grad)[:4]

        _JITTED["fwd"] = jax.jit(dew._attend_forward, static_argnums=(5, 6, 7, 8))
        _JITTED["bwd"] = jax.jit(backward, static_argnums=(0, 1, 2, 3))
    return _JITTED["fwd"], _JITTED["bwd"]


def to_jax(t: torch.Tensor | None):
    if t is None:
        return None
    import jax  # lazy: JAX is optional (the dew backend's); the adapter loads without it

    return jax.dlpack.from_dlpack(t.detach().contiguous())


def to_torch(a) -> torch.Tensor:
    a.block_until_ready()
    return torch.from_dlpack(a)


class Fa3Adapter(KernelAdapter):
    def __init__(self, backend: str | None = None):
        self.backend = backend or pick_backend() or "dew"
        self.name = "fa3"
        self.capability = _capability(self.backend)
        self.description = f"FlashAttention 3 Hopper backward via {self.backend}"

    def available(self) -> str | None:
        r = cuda_reason()
        if r:
            return r
        if self.backend == "interface":
            r = module_reason("flash_attn_interface", "FA3 from flash-attention/hopper")
        else:
            r = module_reason("dew_flash_attn", "pip install dew-flash-attn-cu13") or module_reason("jax")
        return r or sm_reason(9)

    # ------------------------------------------------------------------ forward
    def forward(self, inputs: Inputs, out: Outputs | None = None):
        if self.backend == "interface":
            return self._forward_interface(inputs)
        return self._forward_dew(inputs)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        if self.backend == "interface":
            return self._backward_interface(inputs, fwd, ctx)
        return self._backward_dew(inputs, fwd, ctx)

    # ------------------------------------------------------------------ dew (JAX FFI)
    def _forward_dew(self, inputs: Inputs):
        import jax.numpy as jnp  # lazy: JAX is optional; the adapter loads and says so without it

        p = inputs.problem
        call = Fa3Call.of(p)
        fwd_fn, _ = _dew_fns()
        if p.varlen:
            q, k, v = inputs.q, inputs.k, inputs.v
            starts = (to_jax(inputs.cu_seqlens_q), to_jax(inputs.cu_seqlens_k))
        else:
            q, k, v = (inputs.bshd(n) for n in ("q", "k", "v"))
            starts = None
        torch.cuda.synchronize()
        jq, jk, jv = to_jax(q), to_jax(k), to_jax(v)
        jsink = to_jax(inputs.sink)
        import dew_flash_attn as dew  # lazy: optional package; the adapter loads and says so without it

        # the public functions' own validation (flash_mha / flash_mha_varlen call it first)
        dew._check(
            "flash_mha_varlen" if p.varlen else "flash_mha", 3 if p.varlen else 4, jq, jk, jv, jsink, own_keys=p.varlen
        )
        o, residuals = fwd_fn(jq, jk, jv, jsink, starts, call.longest, call.scale, call.causal, call.window)
        raw_lse = to_torch(residuals[-1])
        o_t = to_torch(o)
        if p.varlen:
            lse = lse_ht_to_thd(raw_lse, p.total_q)
            o_thd = o_t
        else:
            lse = lse_bhs_to_thd(raw_lse)
            o_thd = thd(o_t)
        lse = normalize_lse(lse, p, sink_included=False)  # the sink is added below
        if inputs.sink is not None:
            lse = torch.logaddexp(lse, inputs.sink.float().view(1, -1))
        # keep the JAX arrays alive: the torch views share their memory
        return Outputs(o=o_thd.clone(), lse=lse.clone()), (residuals, o, jnp)

    def _backward_dew(self, inputs: Inputs, fwd: Outputs, ctx):
        p = inputs.problem
        call = Fa3Call.of(p)
        residuals, _, _ = ctx
        _, bwd_fn = _dew_fns()
        do = inputs.do if p.varlen else inputs.bshd("do")
        torch.cuda.synchronize()
        dq, dk, dv, dsink = bwd_fn(call.longest, call.scale, call.causal, call.window, residuals, to_jax(do))
        dq, dk, dv = (to_torch(x).clone() for x in (dq, dk, dv))
        if not p.varlen:
            dq, dk, dv = thd(dq), thd(dk), thd(dv)
        ds = None if dsink is None else to_torch(dsink).float().clone()
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=ds)

    # ------------------------------------------------------------------ flash_attn_interface
    def _forward_interface(self, inputs: Inputs):
        import flash_attn_interface as fa3  # lazy: optional FA3 build; the adapter loads and says so without it

        p = inputs.problem
        call = Fa3Call.of(p)
        kw = dict(softmax_scale=call.scale, causal=call.causal, window_size=call.window, return_attn_probs=True)
        q, k, v = (laid_out_leaf(laid_out(inputs, n)) for n in ("q", "k", "v"))  # the laid-out memory
        if p.varlen:
            res = fa3.flash_attn_varlen_func(
                q, k, v, inputs.cu_seqlens_q, inputs.cu_seqlens_k, p.max_seqlen_q, p.max_seqlen_k, **kw
            )
        else:
            res = fa3.flash_attn_func(q, k, v, **kw)
        o, lse = res[0], res[1]
        if p.varlen:
            o_thd, lse_thd = o.detach(), lse_ht_to_thd(lse.detach(), p.total_q)
        else:
            o_thd, lse_thd = thd(o.detach()), lse_bhs_to_thd(lse.detach())
        return Outputs(o=o_thd, lse=normalize_lse(lse_thd, p)), (q, k, v, o)

    def _backward_interface(self, inputs: Inputs, fwd: Outputs, ctx):
        p = inputs.problem
        q, k, v, o = ctx
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), laid_out(inputs, "do"), retain_graph=True)
        dk, dv = fold_kv_heads(dk, p.heads_kv), fold_kv_heads(dv, p.heads_kv)
        if not p.varlen:
            dq, dk, dv = thd(dq), thd(dk), thd(dv)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv)


def adapter():
    return Fa3Adapter()
