"""FlexAttention compiled with dynamic shapes, the per-problem constants as tensors.

``flex`` (kernels/flex.py) compiles ``flex_attention`` with ``dynamic=False`` and captures
the softmax scale, causal/align, window bounds, softcap and the sink column's index as
Python constants: every new shape, stride or constant is a new Inductor/Triton build. This
adapter runs the same problems as users who train with variable shapes run flex:
``torch.compile(flex_attention, dynamic=True)``, and one mask_mod and one score_mod for
every problem, which read their constants from 0-d tensors (graph inputs, not guards):

- the scale is a tensor the score_mod multiplies by (``flex_attention(scale=1.0)``); Flex
  hands score_mod the logit already times ``scale`` (torch/nn/attention/flex_attention.py,
  "score: the scaled dot product"), so ``score * scale`` is the scaled logit either way;
- the softcap is a tensor too, 0 for none: ``where(cap > 0, cap * tanh(s / cap), s)`` (the
  tanh evaluated on a safe divisor, so the discarded branch is finite and the gradient of
  an uncapped problem exact); every problem runs the same score_mod;
- causal, align, window bounds (None as a bound no sequence reaches), the sink column's
  index and dense-or-varlen are tensors the mask_mod reads; a block mask is built for every
  problem (``create_block_mask`` per problem: the mask is data);
- ALiBi is a slopes tensor (zeros for none) and each query's diagonal and each key's position:
  every problem's score_mod subtracts ``slope[h] * |diagonal - position|`` (exactly nothing at a
  zero slope), so ALiBi's presence and slopes are no graph difference either;
- a relative-position table is a [heads_q, 2 MAX_REL_DISTANCE + 1] tensor (zeros for none): the
  Problem's table padded to the widest R with its edge entries (a distance beyond R reads the
  edge, as the clamp to R does), looked up at clamp(position - diagonal, -MAX_R, MAX_R) + MAX_R,
  so neither its presence, its values nor its R is a graph difference;
- sinks stay a graph difference (the sink tensor requires grad only with sinks, and the
  score_mod reads it only then).

Everything else (layouts, leaves, the sink column, LSE and gradient translation) is flex's:
the backward is ``FlexAdapter.backward``. On the CPU it runs eagerly, as flex does.
"""

from dataclasses import replace

import torch

from difftest.model.inputs import Inputs
from difftest.model.problem import MAX_REL_DISTANCE, Problem

from .flex import (
    CAPABILITY,
    GQA_CAPABILITY,
    SPARSE_CAPABILITY,
    FlexAdapter,
    alibi_positions,
    call_flex,
    create_block_mask,
    flex_attention,
    flex_leaves,
    flex_outputs,
    no_donated_buffers,
    place_sink,
    positions,
    sparse_block_mask,
    with_sink_column,
)
from .flex import make_mask_mod as flex_mask_mod

# a window bound no sequence reaches (max_seqlen is 2048 here; int64 leaves room for any)
NO_BOUND = 1 << 40
# What makes dynamo recompile ``torch.compile(flex_attention, dynamic=True)`` through this
# adapter, measured like flex's key (tests/test_flex_compile_key.py: counting backend on the
# CPU, every recompile must come with a new signature):
# - heads and head dims: flex_attention itself marks dims -3 and -1 of q, k and v static under
#   dynamo (torch 2.13 torch/nn/attention/flex_attention.py:2457-2460, "mark head_dim and number
#   of heads to be static"), so heads_q, heads_kv, head_dim_qk, head_dim_v recompile as under flex;
# - dtype, layout (stride order; kv_broadcast's stride 0) and sinks (the score_mod reads a sink
#   tensor, which requires grad) recompile;
# - batch and lengths are symbolic but not free: a dense batch of one, a length of one and a
#   single block of 128 are specialised (dynamo's 0/1 specialisation, on the block mask's sizes
#   too), and the block mask's sizes enter static at the first compile, so the first change of
#   the block counts or the batch recompiles once (automatic dynamic makes them symbolic then).
#   No Problem field names "one block" or "first change", so batch, seqlen_q, seqlen_k and
#   pad_tail stay in the key (conservative: most of their changes reuse the graph).
# What no longer recompiles, against flex's key: the softmax scale, causal, align, the
# window_left/window_right values (None included), the softcap (value and presence) and the
# ALiBi slopes (values and presence), the relative-position table (values, presence and R).
# Beyond dynamo (the GPU's Inductor, not seen by the CPU's counting backend): the flex lowering
# asks whether the lengths divide the block size with ``statically_known_true`` (torch 2.13
# torch/_inductor/kernel/flex/flex_attention.py:344-353), which adds no guard, so symbolic
# lengths run the bounds-checked kernel (IS_DIVISIBLE False) at every length, where flex's
# static multiples of 128 run the unchecked one: the same math, another Triton kernel.
COMPILE_KEY = (
    "dtype",
    "batch",
    "seqlen_q",
    "seqlen_k",
    "pad_tail",
    "heads_q",
    "heads_kv",
    "head_dim_qk",
    "head_dim_v",
    "sinks",
    "layout",
)
DYNAMIC_CAPABILITY = replace(CAPABILITY, compile_key=COMPILE_KEY, rel_bias=True)
DYNAMIC_GQA_CAPABILITY = replace(GQA_CAPABILITY, compile_key=COMPILE_KEY, rel_bias=True)
DYNAMIC_SPARSE_CAPABILITY = replace(SPARSE_CAPABILITY, compile_key=COMPILE_KEY + ("sparsity",), rel_bias=True)


def constants(p: Problem, device="cpu") -> dict:
    """The Problem's per-problem constants as 0-d tensors on ``device`` (what flex captures as
    Python numbers): scale and softcap (0: none) float32; causal, bottom_right, varlen bool;
    window bounds int64 (None: ``NO_BOUND``); the ALiBi slopes, float32 [heads_q] (zeros: none);
    the relative-position table padded to R = MAX_REL_DISTANCE, float32 [heads_q, 2 MAX_R + 1]
    (``padded_rel_table``; zeros: none)."""

    def t(v, dtype):
        return torch.tensor(v, dtype=dtype, device=device)

    return {
        "scale": t(p.scale, torch.float32),
        "softcap": t(p.softcap or 0.0, torch.float32),
        "causal": t(bool(p.causal), torch.bool),
        "bottom_right": t(p.align == "bottom_right", torch.bool),
        "varlen": t(bool(p.varlen), torch.bool),
        "window_left": t(NO_BOUND if p.window_left is None else p.window_left, torch.int64),
        "window_right": t(NO_BOUND if p.window_right is None else p.window_right, torch.int64),
        "alibi": t(p.alibi_slopes if p.alibi else [0.0] * p.heads_q, torch.float32),
        "rel": t(padded_rel_table(p), torch.float32),
    }


def padded_rel_table(p: Problem) -> list[list[float]]:
    """The Problem's relative-position table widened to R = MAX_REL_DISTANCE by repeating each
    row's edge entries outward (entry d + MAX_R, for every |d| <= MAX_R, is the table's entry at
    clamp(d, -R, R)); zeros without a table."""
    m = MAX_REL_DISTANCE
    if p.rel_bias is None:
        return [[0.0] * (2 * m + 1) for _ in range(p.heads_q)]
    r = p.rel_distance
    return [[row[min(r, max(-r, d)) + r] for d in range(-m, m + 1)] for row in p.rel_bias]


def make_mask_mod(p: Problem, device="cpu"):
    """flex's mask_mod (kernels/flex.py ``make_mask_mod``: the same rule over the same
    packed positions) with no Python branch on the Problem: every constant a tensor.
    Returns (mask_mod, n_keys, constants)."""
    sq_id, q_pos, sk_id, k_pos = positions(p, device)
    n_keys = k_pos.shape[0]
    # one sentinel key past the real ones (the sink column's index, or nothing), id -3 matching no
    # query: every kv_idx the block mask asks about indexes in range, with no clamp, also when
    # there is no key at all (flex's clamp to n_keys - 1 reads index -1 of an empty tensor)
    sk_id = torch.cat([sk_id, torch.full((1,), -3, dtype=sk_id.dtype, device=device)])
    k_pos = torch.cat([k_pos, torch.zeros(1, dtype=k_pos.dtype, device=device)])
    lens_q = torch.tensor(p.seqlens_q, device=device)
    lens_k = torch.tensor(p.seqlens_k, device=device)
    c = constants(p, device)
    n_keys_t = torch.tensor(n_keys, dtype=torch.int64, device=device)
    sinks_t = torch.tensor(bool(p.sinks), device=device)
    causal, br, varlen, wl, wr = c["causal"], c["bottom_right"], c["varlen"], c["window_left"], c["window_right"]

    def mask_mod(b, h, q_idx, kv_idx):
        sid = sq_id[q_idx]
        same = sid == sk_id[kv_idx]
        seq = torch.where(varlen, torch.clamp(sid, min=0), b)
        i = q_pos[q_idx]
        j = k_pos[kv_idx]
        i = i + torch.where(br, lens_k[seq] - lens_q[seq], 0)
        ok = same & (~causal | (j <= i)) & (j <= i + wr) & (j >= i - wl) & (kv_idx < n_keys_t)
        return ok | (sinks_t & (kv_idx == n_keys_t) & (sid >= 0))

    return mask_mod, n_keys, c


def make_score_mod(c: dict, sink, n_keys: int, device="cpu", positions=None):
    """The score_mod every problem runs: the scale, the softcap (0: none), ALiBi's
    ``- slope[h] * |diagonal[q] - position[k]|`` and the relative-position table's
    ``rel[h, clamp(position[k] - diagonal[q], -MAX_R, MAX_R) + MAX_R]`` after the cap (flex's
    order; ``positions``: flex's ``alibi_positions``, None: no bias term at all) and, with a
    sink tensor, the sink column (index ``n_keys``) taking the head's sink logit, uncapped."""
    scale, cap, slopes, rel = c["scale"], c["softcap"], c["alibi"], c["rel"]
    capped = cap > 0
    safe = torch.where(capped, cap, torch.ones_like(cap))
    n_keys_t = torch.tensor(n_keys, dtype=torch.int64, device=device)

    def score_mod(score, b, h, q_idx, kv_idx):
        # no cast of the float32 constants to score.dtype: flex traces score_mod with a score of
        # the inputs' dtype, so the cast would round the scale to bf16/fp16 (measured on the CPU:
        # 0.37 -> 0.369, a bf16 ulp in O), while the kernel's scores are float32
        s = score * scale
        s = torch.where(capped, torch.tanh(s / safe) * safe, s)
        if positions is not None:
            diagonal, k_pos = positions
            distance = k_pos[kv_idx] - diagonal[q_idx]
            s = s - slopes[h] * torch.abs(distance)
            column = torch.clamp(distance, -MAX_REL_DISTANCE, MAX_REL_DISTANCE).to(torch.int64) + MAX_REL_DISTANCE
            s = s + rel[h, column]
        if sink is not None:
            s = place_sink(s, h, kv_idx, sink, n_keys_t)
        return s

    return score_mod


def compiled_flex_dynamic(backend="inductor"):
    """``flex_attention`` compiled as this adapter runs it on CUDA (``dynamic=True``);
    ``backend`` as in flex's ``compiled_flex`` (tests count compiles with their own)."""
    import torch._dynamo  # lazy: ~1.5 s to import; only the CUDA path (and its test) compiles

    # room for every configuration a campaign draws, as flex keeps (kernels/flex.py compiled_flex)
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 512)
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 512)
    no_donated_buffers()
    return torch.compile(flex_attention, dynamic=True, backend=backend)


_CACHE: dict = {}


def _flex_fn(device_type: str):
    if device_type != "cuda":
        return flex_attention
    if "compiled" not in _CACHE:
        _CACHE["compiled"] = compiled_flex_dynamic()
    return _CACHE["compiled"]


class FlexDynamicAdapter(FlexAdapter):
    name = "flex-dynamic"
    capability = DYNAMIC_CAPABILITY
    description = (
        "torch FlexAttention compiled with dynamic=True; scale, softcap, causal/align, window bounds, "
        "ALiBi slopes and a relative-position table as tensors (no recompile when they change)"
    )

    def __init__(self, gqa: bool = False, sparse: bool = False):
        if sparse:
            self.name = "flex-dynamic-sparse"
            self.capability = DYNAMIC_SPARSE_CAPABILITY
            self.description = "flex-dynamic with block-sparse BlockMasks and top-k selections"
        if gqa:
            self.name = "flex-dynamic-gqa"
            self.capability = DYNAMIC_GQA_CAPABILITY
            self.description = "flex-dynamic with enable_gqa=True (square dense problems)"

    def translate(self, inputs: Inputs, grad: bool = True, flex_fn=None):
        """As ``FlexAdapter.translate`` (the same leaves, sink column, outputs and ctx, so
        flex's backward serves), through the tensor-constant mods and an always-built block mask."""
        p = inputs.problem
        dev = inputs.device
        leaves, lay = flex_leaves(inputs, grad)
        q = lay(leaves[0])
        mask_mod, n_keys, c = make_mask_mod(p, dev)
        sink, kk, vv = with_sink_column(inputs, lay(leaves[1]), lay(leaves[2]), grad)
        B, Lq, Lk = q.shape[0], q.shape[2], kk.shape[2]
        # ALiBi's and the table's positions for every problem (zero slopes, a zero table without
        # them): one graph for all
        positions = alibi_positions(p, n_keys, dev)
        if Lq == 0 or Lk == 0:
            # no token on a side (only all-empty varlen problems; batch, lengths, pad_tail and sinks
            # fix it, so it is a signature of its own): nothing to mask or bias, and vmap over an
            # empty range fails on the tensor constants ("select(): index 0 out of range"), which
            # flex's own mask_mod, of Python constants, passes
            mask_mod = flex_mask_mod(p, dev)[0]
            positions = None
        score_mod = make_score_mod(c, sink, n_keys, dev, positions)
        if p.sparse:
            block_mask = sparse_block_mask(p, mask_mod, n_keys, B, Lq, Lk, dev)
        else:
            block_mask = create_block_mask(mask_mod, B, None, Lq, Lk, device=str(dev))
        fn = flex_fn if flex_fn is not None else _flex_fn(dev.type)
        o, lse = call_flex(fn, q, kk, vv, score_mod, block_mask, 1.0, q.shape[1] != kk.shape[1])
        return flex_outputs(o, lse, p), (*leaves, sink, o, lay)


def gqa():
    return FlexDynamicAdapter(gqa=True)


def sparse():
    return FlexDynamicAdapter(sparse=True)
