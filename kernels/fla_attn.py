"""flash-linear-attention's softmax attention (PyPI ``fla-core`` 0.6.0,
``fla.ops.attn.parallel.parallel_attn``; Triton forward and backward) through its public API.

``parallel_attn(q, k, v, g=None, scale=None, window_size=None, cu_seqlens=None, chunk_indices=None,
*, sink_bias=None)`` takes q [B, T, HQ, K], k [B, T, H, K], v [B, T, H, V] and returns o only;
gradients come from torch autograd through its ``ParallelAttentionFunction.backward`` (the
kernel under test). Conventions: always causal self-attention (one T for queries and keys),
sliding window ``window_size`` = difftest's ``window_left + 1`` (keys [i - window_size + 1, i]),
varlen through FlashAttention-style ``cu_seqlens`` with B = 1, GQA by head groups (dK/dV summed
inside fla), per-query-head sink logits ``sink_bias`` with a gradient (the same softmax-denominator
term as difftest's sink). ``g`` (gated attention) is never passed. No LSE is returned.

Device: CUDA when a CUDA device is visible; otherwise, with ``TRITON_INTERPRET=1`` in the
environment (set before fla is imported), the CPU under Triton's interpreter: the same Triton
kernels run one program at a time in NumPy, with fla's CPU block sizes (BT 64 / BS 32 in the
backward instead of Hopper's 128 / 64), so a CPU run checks the kernels' logic, not GPU numerics.
The interpreter cannot run bf16 ``tl.dot`` (triton/runtime/interpreter.py ``create_dot`` matmuls
the raw bf16 bit patterns), so bfloat16 is declared on CUDA only; float32 only there (on a GPU,
Triton's fp32 ``tl.dot`` is TF32).

On CUDA, fla 0.6.0 dispatches ``parallel_attn_fwd/bwd`` to a TileLang backend by default on Hopper
with Triton >= 3.4 when tilelang and nvcc are present (fla/ops/attn/backends/tilelang/__init__.py:
``default_enable = IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0``); this adapter tests the Triton
kernels, so it is unavailable while another backend would be picked: set ``FLA_TILELANG=0``.

Install without network: ``pip install --no-deps fla_core-0.6.0-py3-none-any.whl einops-*.whl``.
"""

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import autograd_backward, laid_out, laid_out_leaf, module_reason, thd

WHEEL = "pip install --no-deps fla-core==0.6.0 einops"
VERSION = "0.6.0"

# The contract, as fla-core 0.6.0's own code states it (fla/ops/attn/parallel.py of the wheel,
# read for this capability, not inferred from runs):
# - causal always: the forward's diagonal block masks o_q >= o_k (parallel.py:154), the earlier
#   blocks are all below the diagonal (103: keys before the query block); dq (333, 337) and
#   dk/dv (452, 456; 473: later query blocks only) the same: causal_required.
# - one T for queries and keys: k's shape gives B, T (530, 620) and q is indexed with the same
#   T and bos (75, 260); the docstring's shapes `[B, T, HQ, K]` / `[B, T, H, K]` (795-800):
#   seqlen_q_ne_k=False, so the causal diagonal is the square one (aligns does not matter).
# - window: keys [i - window_size + 1, i] (docstring 806-808; `o_q - o_k < W` at 120, 156, 303,
#   333, 452, 496): window_size = window_left + 1; window_right >= 0 adds nothing to a causal
#   mask (difftest/model/problem.py key_bounds), so any window_right is served.
# - varlen: cu_seqlens FlashAttention-style with B == 1 (ValueError at 833-837); per-sequence
#   T = eos - bos (64, 249, 398) and chunk_indices from cu_seqlens (552-553, 644-645): a
#   zero-length sequence yields no chunk (empty_seqs), tail tokens past cu_seqlens[-1] belong to
#   no chunk (pad_tail; but see the dSink finding in results/fla.md).
# - GQA: HQ % H == 0 (ValueError at 831-832), head i_hq reads kv head i_hq // G (59); dk/dv are
#   per query head then summed (651-653, 716-717).
# - sinks: `sink_bias` [HQ] (assert 838-839), multiplied by RCP_LN2 (738) and added to the
#   log2-domain denominator only, `b_acc += exp2(b_sink_bias - b_m)` (170-178): exp(sink_h) in the
#   natural-log denominator, unscaled by `scale`, no value row: difftest's sink
#   (oracles/chunked.py:10). Its gradient -sum_i exp(sink_h - LSE_i) * Delta_i (721-724) is
#   difftest's dSink (oracles/chunked.py:15); returned as the sink_bias input's grad (777).
# - scale: any float (`scale` multiplies q.k at 113, 148; None -> K ** -0.5 at 828-829).
# - head dims: K <= 256 (forward `assert NK == 1` with BK = min(256, next_pow2(K)), 536/555);
#   V any in the forward (split in BV blocks, 537/550), one BV = next_pow2(V) block in the
#   backward (623-629); K != V allowed (separate K and V everywhere); every load masks
#   `o_d < K` / `o_v < V`, so no alignment. Declared 1..256 (odd ones included).
# - dtypes: o in v.dtype (557), returned as q.dtype (754); P cast to q's dtype before P.V (132)
#   as FlashAttention does. No dtype check: fp16/bf16 declared on CUDA (fp32 GEMMs are TF32 in
#   Triton by default), fp16/fp32 under the interpreter (see the module docstring).
# - outputs: o only (ParallelAttentionFunction.forward returns o, 754; lse stays in ctx, 750);
#   backward dq, dk, dv, dsink (777). No atomics: dq per query block, dk/dv per key block and
#   query head, then a sum (716-717): deterministic.
# - layouts: `@contiguous` (fla/utils/decorators.py:163 -> input_guard 97-160) makes every tensor
#   argument contiguous inside fla, so every layout of difftest/model/layouts.py reaches the
#   kernel as fla's own copy; the adapter hands over the laid-out memory.
# - max_seqlen / max_heads / max_batch are campaign bounds (time), not fla's.
DIMS = tuple(range(8, 257, 8)) + (1, 3, 20, 100, 127)


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def device_here() -> str:
    """'cuda' when a CUDA device is visible, 'cpu' under TRITON_INTERPRET=1 without one, else 'cuda'
    (then ``available`` says why not)."""
    if torch.cuda.is_available():
        return "cuda"
    return "cpu" if _interpreted() else "cuda"


def takes_sinks() -> bool:
    """Whether the fla-core on the path has sinks: ``parallel_attn`` takes ``sink_bias`` since
    0.5.0 (0.4.2's signature has none). Read from the source, not imported (fla decorates its
    kernels at import, interpreted or not: a child process imports it); True where fla is absent
    (0.6.0's interface, the one cited here)."""
    spec = importlib.util.find_spec("fla")  # the top-level package only: nothing of it is run
    if spec is None or not spec.submodule_search_locations:
        return True
    source = Path(next(iter(spec.submodule_search_locations))) / "ops" / "attn" / "parallel.py"
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return True
    head = re.search(r"def parallel_attn\((.*?)\)\s*(->[^:]*)?:", text, re.S)
    return head is None or "sink_bias" in head.group(1)


def _capability(device: str) -> Capability:
    cpu, sinks = device == "cpu", takes_sinks()
    return Capability(
        dtypes=("float16", "float32") if cpu else ("float16", "bfloat16"),
        head_dims_qk=DIMS,
        head_dims_v=DIMS,
        equal_head_dims=False,
        max_batch=4 if cpu else 8,
        max_seqlen=512 if cpu else 4096,
        max_heads=8 if cpu else 32,
        gqa=True,
        seqlen_q_ne_k=False,
        causal=True,
        causal_required=True,
        aligns=("bottom_right", "top_left"),
        window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=sinks,
        softmax_scale=True,
        layouts=LAYOUTS,
        outputs=("o", "dq", "dk", "dv") + (("dsink",) if sinks else ()),
        deterministic=True,
        device=device,
        # the backward's tiles: BT x BS = 64 x 32 on the CPU / non-Ampere path, 128 x 64 on Hopper
        # (parallel.py:625-642); the forward's BT is 128 everywhere (533)
        block_m=64 if cpu else 128,
        block_n=32 if cpu else 64,
        # Triton constexprs (parallel.py:40-54): W, B, H, HQ, G, K, V and the USE_* flags
        compile_key=("dtype", "head_dim_qk", "head_dim_v", "heads_q", "heads_kv", "window_left", "sinks", "batch"),
    )


@dataclass(frozen=True)
class FlaCall:
    """What parallel_attn gets for a Problem, besides tensors (testable without fla)."""

    scale: float
    window_size: int | None
    varlen: bool

    @staticmethod
    def of(p: Problem) -> "FlaCall":
        if not p.causal:
            raise ValueError(f"fla parallel_attn is always causal; got a non-causal problem ({p.short()})")
        if p.seqlens_q != p.seqlens_k:
            raise ValueError(
                f"fla parallel_attn is self-attention (one T); got seqlens_q {p.seqlens_q} != seqlens_k {p.seqlens_k}"
            )
        return FlaCall(scale=p.scale, window_size=None if p.window_left is None else p.window_left + 1, varlen=p.varlen)


class FlaAttnAdapter(KernelAdapter):
    name = "fla-attn"

    def __init__(self, device: str | None = None):
        self.device = device or device_here()
        self.capability = _capability(self.device)
        where = "CUDA" if self.device == "cuda" else "the CPU under Triton's interpreter (TRITON_INTERPRET=1)"
        self.description = (
            f"fla-core {VERSION} fla.ops.attn.parallel.parallel_attn (Triton forward/backward, "
            f"always causal), on {where}"
        )

    def available(self) -> str | None:
        return fla_reason(self.device, "fla.ops.attn.parallel:parallel_attn_bwd_kernel_dq") or (
            _backend_reason() if self.device == "cuda" else None
        )

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: fla-core is optional, and must be imported after TRITON_INTERPRET is set (CPU runs)
        from fla.ops.attn.parallel import parallel_attn

        p = inputs.problem
        call = FlaCall.of(p)
        q, k, v = (laid_out_leaf(laid_out(inputs, n)) for n in ("q", "k", "v"))  # the laid-out memory
        sink = None if inputs.sink is None else inputs.sink.detach().clone().requires_grad_(True)
        if call.varlen:  # packed [T, H, D] as one sequence of B = 1, offsets as LongTensor
            cu = inputs.cu_seqlens_q.long()
            o = parallel_attn(
                q.unsqueeze(0),
                k.unsqueeze(0),
                v.unsqueeze(0),
                scale=call.scale,
                window_size=call.window_size,
                cu_seqlens=cu,
                sink_bias=sink,
            )[0]
            o_thd = o.detach()
        else:
            o = parallel_attn(q, k, v, scale=call.scale, window_size=call.window_size, sink_bias=sink)
            o_thd = thd(o.detach())
        return Outputs(o=o_thd), (q, k, v, sink, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        return autograd_backward(inputs, fwd, ctx)


def _backend_reason() -> str | None:
    """None when fla would run parallel_attn's Triton kernels (no other backend enabled)."""
    try:
        from fla.backends import _load_operation_registry  # lazy: fla-core is optional

        active = _load_operation_registry("attn").get_active()
    except Exception as e:  # noqa: BLE001 - a changed fla: say so rather than guess
        return f"cannot tell which fla backend runs parallel_attn: {e!r}"
    if active is not None:
        return (
            f"fla would dispatch parallel_attn to its {active.backend_type!r} backend, not the Triton kernels "
            f"this adapter tests: set FLA_TILELANG=0 (or FLA_DISABLE_BACKEND_DISPATCH=1)"
        )
    return None


def _numpy_reason() -> str | None:
    """Triton <= 3.6's interpreter turns a program id (a 1-element array) into a Python int with
    ``int(array)``, which NumPy >= 2.4 refuses (triton-lang/triton#9171, fixed after 3.6)."""
    # lazy: NumPy and Triton are optional (neither is a dependency); asked only on the interpreter path
    import numpy
    import triton

    def major_minor(v: str) -> tuple:
        return tuple(int(x) for x in v.split(".")[:2] if x.isdigit())

    if major_minor(numpy.__version__) >= (2, 4) and major_minor(triton.__version__) <= (3, 6):
        return (
            f"Triton {triton.__version__}'s interpreter fails on NumPy {numpy.__version__} "
            f"(triton-lang/triton#9171): pip install 'numpy<2.4' into this environment"
        )
    return None


def _interpreter_reason(kernel: str) -> str | None:
    """fla's kernels are interpreted only if fla was imported with TRITON_INTERPRET set;
    ``kernel``: "module:name" of one of the kernels the adapter runs."""
    # lazy: fla-core and Triton are optional; the adapter loads and says so without them
    from triton.runtime.interpreter import InterpretedFunction

    module, name = kernel.split(":")
    fn = getattr(importlib.import_module(module), name)
    while not isinstance(fn, InterpretedFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    if not isinstance(fn, InterpretedFunction):
        return "fla was imported before TRITON_INTERPRET=1 was set: its kernels are compiled, not interpreted"
    return None


def fla_reason(device: str, kernel: str) -> str | None:
    """Why fla's Triton kernels cannot run on ``device`` here, None when they can: fla-core,
    einops and Triton importable; on CUDA a device; on the CPU Triton's interpreter set before
    fla was imported (``kernel``, "module:name", is checked) and a NumPy it works with."""
    why = module_reason("fla", WHEEL) or module_reason("einops", WHEEL) or module_reason("triton", "pip install triton")
    if why:
        return why
    if device == "cuda":
        if not torch.cuda.is_available():
            return (
                "no CUDA device (torch.cuda.is_available() is False) and TRITON_INTERPRET is not set "
                "(TRITON_INTERPRET=1 runs fla's Triton kernels on the CPU)"
            )
        return None
    if not _interpreted():
        return "device cpu needs TRITON_INTERPRET=1 (Triton's interpreter) in the environment"
    return _numpy_reason() or _interpreter_reason(kernel)


def adapter():
    return FlaAttnAdapter()
