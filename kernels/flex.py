"""FlexAttention (torch.nn.attention.flex_attention) with masks as block masks.

- Dense problems run on [B, H, S, D]; the mask_mod applies the Problem's causal/window
  rule at any alignment.
- Varlen problems run as document masking over the packed tokens ([1, H, T, D]): a query
  and a key interact only inside the same sequence, at positions counted from that
  sequence's start; unused tail tokens belong to no sequence (their rows see nothing).
- Windows go into the mask_mod as the Problem states them, negative sides included: a
  crossed window leaves rows with no key (Flex: O 0, LSE -inf).
- A softcap is the ``score_mod`` ``softcap * tanh(score / softcap)`` on the scaled score
  (FlexAttention's tanh soft-capping), before the mask.
- ALiBi is the ``score_mod`` adding -slope[h] * |i + offset - j| after the cap (a float32 slope
  tensor the score_mod captures; the positions within each sequence, varlen included, and
  the mask's offset per sequence as the mask_mod reads them).
- Sinks are expressed as one extra key column per sequence set (appended after the last
  key, value 0) whose score ``score_mod`` replaces by the head's sink logit; dSink is the
  gradient flowing into that captured tensor. The extra key is visible to every real
  query row.
- On CUDA the call is ``torch.compile``d (the Triton kernels under test); on the CPU it
  runs eagerly (the reference implementation), which CI uses to check the translation.
LSE comes back natural-log, [B, H, S], -inf for an empty row.
"""

from dataclasses import replace

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import cuda_reason, fold_kv_heads, laid_out, lse_bhs_to_thd, normalize_lse
from .masking import selected_blocks, visible_keys

try:  # FlexAttention is torch >= 2.5's (the floor is 2.4): without it the adapters load and say so
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

    FLEX_MISSING = None
except ImportError as e:  # pragma: no cover - torch 2.4
    BlockMask = create_block_mask = flex_attention = None
    FLEX_MISSING = f"torch.nn.attention.flex_attention missing: {e}"
try:  # a newer torch returns the LSE through return_aux=AuxRequest(lse=True); older ones take return_lse=True
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:
    AuxRequest = None

# The contract (torch 2.13's source; the H200 runs 2.11): flex_attention validates q/k/v
# as SDPA inputs of one device (torch/nn/attention/flex_attention.py:2315-2318), q and k
# with the same embedding dim and v's free (_validate_embed_dim, :2067), 4-D tensors, GQA
# with enable_gqa when Hq % Hkv == 0 (:2320-2333); the compiled lowering refuses head dims
# below 16 ("NYI: embedding dimension ... must be at least 16",
# torch/_inductor/kernel/flex/flex_attention.py:160) and handles non-power-of-2 dims by
# masking (SAFE_HEAD_DIM, _inductor/kernel/flex/common.py:416-419). So every head dim from
# 16 (256 here is a campaign bound, not flex's), qk and v independent. Memory layouts: no
# stride requirement outside fp8 (_enforce_mem_layouts acts on fp8 dtypes only), so every
# layout of difftest/model/layouts.py; the compiled kernel specialises on strides (dynamic=False:
# a new layout is a recompile). With sinks the adapter appends the sink's key column to K
# and V (a concatenated copy), so under a layout only q and dO reach the kernel laid out.
_DIMS = tuple(range(16, 257))
# What makes dynamo recompile the adapter's ``torch.compile(flex_attention, dynamic=False)``
# call, measured through dynamo's guards on the CPU with a counting backend
# (tests/test_flex_compile_key.py replays drawn problems through ``translate`` and checks
# every recompile comes with a new signature): every tensor shape (dtype, batch,
# seqlen_q/seqlen_k, heads, head dims; for varlen the packed totals, so pad_tail; the sink
# column), q/k/v strides (layout: bhsd, dim_slice, kv_broadcast recompile; offset,
# misaligned and do_transposed did not, kept anyway as Inductor may treat alignment
# apart), and the Python constants the call and its mask_mod/score_mod capture: the scale
# (softmax_scale, or head_dim_qk through its default), causal, align, every window_left /
# window_right value (negative ones too), sinks, the softcap (a constant the score_mod
# captures); ALiBi's slopes are a captured tensor (its presence changes the graph; the key
# names the slopes, conservatively). What never recompiles: seed, values, value_scale and
# sink_center (tensor contents), and varlen splits with the same totals (the key is
# conservative there: seqlen_q/seqlen_k tuples split configurations dynamo would share).
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
    "softmax_scale",
    "causal",
    "align",
    "window_left",
    "window_right",
    "sinks",
    "layout",
    "softcap",
    "alibi_slopes",
)
_COMMON = dict(
    dtypes=("float16", "bfloat16", "float32"),
    head_dims_qk=_DIMS,
    head_dims_v=_DIMS,
    max_batch=4,
    max_seqlen=2048,
    max_heads=16,
    equal_head_dims=False,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=True,
    negative_window=True,
    softcap=True,
    alibi=True,
    outputs=("o", "lse", "dq", "dk", "dv", "dsink"),
    deterministic=False,
    device="cuda",
    block_m=128,
    block_n=128,
    layouts=LAYOUTS,
    compile_key=COMPILE_KEY,
)
# Measured on the H200 (torch 2.11): with enable_gqa=True and a
# query length different from the key length (sq != sk, or the extra sink column), the
# compiled backward fails to lower ("NoValidChoicesError: No choices to select"). So
# GQA runs as its own adapter restricted to square, sink-free, dense problems.
CAPABILITY = Capability(gqa=False, varlen=True, empty_seqs=True, pad_tail=True, sinks=True, **_COMMON)
GQA_CAPABILITY = Capability(
    gqa=True, seqlen_q_ne_k=False, varlen=False, empty_seqs=False, pad_tail=False, sinks=False, **_COMMON
)


# Sparse masks (difftest/model/sparsity.py). torch 2.13's BlockMask.from_kv_blocks takes the
# kept (partial) and full key blocks of each query block at BLOCK_SIZE (Q_BLOCK_SIZE, KV_BLOCK_SIZE),
# 128 by default (torch/nn/attention/flex_attention.py, _DEFAULT_SPARSE_BLOCK_SIZE); a partial block
# runs mask_mod per element, a full block skips it. A dense, sink-free block-sparse Problem at
# 128 x 128 is handed over as that block list itself: kv_indices list the selected blocks (those
# the causal/window rule leaves whole as full blocks), and the mask_mod, which Flex requires to agree
# with the list (its eager path applies the mask_mod alone), is the rule AND the block's selection;
# the forward walks kv_indices and the backward the transposed q_indices, where a block-sparse
# backward goes wrong (flash-attention#2623). Every other sparse
# Problem (top-k at any block size, varlen, sinks) puts the selection into the mask_mod, as a lookup
# of the visible keys, and create_block_mask derives the blocks. Flex has no backward on the CPU
# ("FlexAttention does not support backward on CPU", torch 2.13, eager and compiled alike), so the
# sparse adapter's gradients need a GPU; the CPU checks the translation (tests/test_sparsity.py).
SPARSE_BLOCK = (128, 128)
SPARSE_CAPABILITY = replace(
    CAPABILITY,
    block_sparse=(SPARSE_BLOCK,),
    topk_sparse=((1, 1), (1, 64), (64, 64)),
    compile_key=COMPILE_KEY + ("sparsity",),
)


def sparse_block_mask(p: Problem, mask_mod, n_keys: int, B: int, Lq: int, Lk: int, device="cpu"):
    """The BlockMask of a sparse Problem (the comment above says which form)."""
    sp = p.sparsity
    if sp.kind == "block" and not p.varlen and not p.sinks:
        sq, sk = p.seqlen_q, p.seqlen_k
        sel = selected_blocks(p, sq, sk)
        nq, nk = sel.shape
        base = visible_keys(p.replace(sparsity=None), sq, sk)
        pad = torch.zeros(nq * sp.block_q, nk * sp.block_k, dtype=torch.bool)
        pad[:sq, :sk] = base  # tail rows and columns never full
        whole = pad.view(nq, sp.block_q, nk, sp.block_k).all(dim=3).all(dim=1)
        full, partial = sel & whole, sel & ~whole

        def listed(m):  # [nq, nk] -> (counts [1, 1, nq], indices [1, 1, nq, nk]), listed blocks first
            order = torch.argsort((~m).to(torch.int8), dim=1, stable=True).to(torch.int32)
            return (m.sum(dim=1).to(torch.int32).view(1, 1, nq).to(device), order.view(1, 1, nq, nk).to(device))

        sel_d = sel.to(device)

        def sparse_mod(b, h, q_idx, kv_idx):  # the block mask's own rule, element by element
            return mask_mod(b, h, q_idx, kv_idx) & sel_d[q_idx // sp.block_q, kv_idx // sp.block_k]

        return BlockMask.from_kv_blocks(
            *listed(partial),
            *listed(full),
            BLOCK_SIZE=(sp.block_q, sp.block_k),
            mask_mod=sparse_mod,
            seq_lengths=(Lq, Lk),
        )
    table = _visible_table(p, n_keys, device)

    def lookup(b, h, q_idx, kv_idx):
        return table[q_idx, kv_idx]

    return create_block_mask(lookup, B, None, Lq, Lk, device=str(device))


def _visible_table(p: Problem, n_keys: int, device) -> torch.Tensor:
    """[query tokens, key tokens (+ the sink column)] bool: packed (varlen) or one sequence's
    (dense: every sequence has its lengths, and so its pattern) visible keys."""
    rows, cols = (p.total_q, n_keys) if p.varlen else (p.seqlen_q, p.seqlen_k)
    table = torch.zeros(rows, cols + int(p.sinks), dtype=torch.bool)
    seqs = range(p.batch) if p.varlen else range(1)
    for b in seqs:
        q0, k0 = (p.cu_seqlens_q[b], p.cu_seqlens_k[b]) if p.varlen else (0, 0)
        sq, sk = p.seqlens_q[b], p.seqlens_k[b]
        table[q0 : q0 + sq, k0 : k0 + sk] = visible_keys(p, sq, sk)
        if p.sinks:
            table[q0 : q0 + sq, cols] = True
    return table.to(device)


def positions(p: Problem, device="cpu"):
    """Per packed token: (sequence id, position within it) for queries and keys.
    Tail tokens get ids -1 (queries) and -2 (keys) so they never match. Dense problems
    use the batch axis, so these are [S] ranges and id 0."""

    def build(lens, total):
        seq = torch.full((total,), -1, dtype=torch.int64)
        pos = torch.zeros(total, dtype=torch.int64)
        start = 0
        for b, n in enumerate(lens):
            seq[start : start + n] = b
            pos[start : start + n] = torch.arange(n)
            start += n
        return seq.to(device), pos.to(device)

    if not p.varlen:
        return (
            torch.zeros(p.seqlen_q, dtype=torch.int64, device=device),
            torch.arange(p.seqlen_q, device=device),
            torch.zeros(p.seqlen_k, dtype=torch.int64, device=device),
            torch.arange(p.seqlen_k, device=device),
        )
    sq, pq = build(p.seqlens_q, p.total_q)
    sk, pk = build(p.seqlens_k, p.total_k)
    sk = torch.where(sk < 0, torch.full_like(sk, -2), sk)
    return sq, pq, sk, pk


def make_mask_mod(p: Problem, device="cpu"):
    """The Problem's mask rule as a FlexAttention mask_mod over (packed) token indices.
    With sinks, key index ``n_keys`` (one past the real keys) is the sink column."""
    sq_id, q_pos, sk_id, k_pos = positions(p, device)
    lens_q = torch.tensor(p.seqlens_q, device=device)
    lens_k = torch.tensor(p.seqlens_k, device=device)
    n_keys = k_pos.shape[0]
    align_br = p.align == "bottom_right"
    causal, wl, wr = p.causal, p.window_left, p.window_right
    sinks = p.sinks

    def mask_mod(b, h, q_idx, kv_idx):
        kv = torch.clamp(kv_idx, max=n_keys - 1)
        sid = sq_id[q_idx]
        same = sid == sk_id[kv]
        if p.varlen:
            seq = torch.clamp(sid, min=0)
        else:
            seq = b
        i = q_pos[q_idx]
        j = k_pos[kv]
        if align_br:
            i = i + lens_k[seq] - lens_q[seq]
        ok = same
        if causal:
            ok = ok & (j <= i)
        if wr is not None:
            ok = ok & (j <= i + wr)
        if wl is not None:
            ok = ok & (j >= i - wl)
        ok = ok & (kv_idx < n_keys)
        if sinks:
            ok = ok | ((kv_idx == n_keys) & (sid >= 0))
        return ok

    return mask_mod, n_keys


def make_score_mod(p: Problem, sink, n_keys: int, device="cpu"):
    """The Problem's score modifications as a FlexAttention ``score_mod`` (None: none). Flex
    hands it the logit already times ``scale`` (torch/nn/attention/flex_attention.py: "score:
    the scaled dot product"), so a softcap is FlexAttention's own tanh soft-capping,
    ``softcap * tanh(score / softcap)`` (its docs' and tests' ``_generate_tanh_softcap``), the
    cap's derivative through autograd of the score_mod; ALiBi adds -slope[h] * |i + offset - j|
    after it (``alibi_terms``). The sink column (index ``n_keys``) takes the head's sink logit,
    uncapped and unbiased (problem.py: the sink joins the softmax as is)."""
    cap = p.softcap
    alibi = alibi_terms(p, n_keys, device) if p.alibi else None
    if sink is None and cap is None and alibi is None:
        return None

    def score_mod(score, b, h, q_idx, kv_idx):
        if cap is not None:
            score = torch.tanh(score / cap) * cap
        if alibi is not None:
            slopes, diagonal, k_pos = alibi
            score = score - slopes[h] * torch.abs(diagonal[q_idx] - k_pos[kv_idx])
        if sink is not None:
            score = place_sink(score, h, kv_idx, sink, n_keys)
        return score

    return score_mod


def alibi_terms(p: Problem, n_keys: int, device="cpu"):
    """(slopes [Hq] float32, each query token's diagonal i + offset of its sequence, each key
    token's position, one more for the sink column) for the ALiBi score_mod, float32."""
    return torch.tensor(p.alibi_slopes, dtype=torch.float32, device=device), *alibi_positions(p, n_keys, device)


def alibi_positions(p: Problem, n_keys: int, device="cpu"):
    """``alibi_terms`` without the slopes: (diagonals, key positions), whether or not ``p`` has
    ALiBi (flex-dynamic's one score_mod takes them for every problem)."""
    sq_id, q_pos, _, k_pos = positions(p, device)
    offsets = torch.tensor([sk - sq for sq, sk in zip(p.seqlens_q, p.seqlens_k)], device=device)
    if p.align != "bottom_right":
        offsets = torch.zeros_like(offsets)
    diagonal = (q_pos + offsets[torch.clamp(sq_id, min=0)]).float()
    k_pos = torch.cat([k_pos, k_pos.new_zeros(max(0, n_keys + 1 - k_pos.shape[0]))]).float()
    return diagonal, k_pos


def no_donated_buffers() -> None:
    """Let a compiled flex backward run more than once per forward. The adapter's backward
    is ``autograd.grad(..., retain_graph=True)`` and a campaign calls it again on the same
    forward (the determinism reruns); AOTAutograd's donated buffers free the saved tensors
    after the first call and refuse the second ("compiled with non-empty donated buffers
    which requires ... retain_graph=False"; seen on the H100 with ``dynamic=True``, every
    case). The switch is read when the backward graph compiles, which may be at the first
    backward call, so it is set for the process (the kernel's own worker) and not patched
    around the forward alone."""
    import torch._functorch.config  # lazy: only the CUDA path (and its test) compiles

    torch._functorch.config.donated_buffer = False


def place_sink(score, h, kv_idx, sink, n_keys):
    """``score`` with the sink column (key index ``n_keys``) taking head ``h``'s sink logit,
    float32 as the Problem holds it. No cast to ``score.dtype``: flex traces the score_mod with
    a score of the inputs' dtype (torch 2.13 torch/_higher_order_ops/flex_attention.py:439-441),
    while its scores are float32 (the Triton kernel's accumulator; the eager path's
    working_precision, same file :190). A ``.to(score.dtype)`` put a bf16/fp16 cast in the traced
    graph: Inductor computes bf16/fp16 in float32 and drops it (the compiled kernel keeps the
    float32 sink, LSE 6e-7 from the float64 truth on the H100, torch 2.11, cast or not), but the
    eager path runs the graph as written and rounded the sink (LSE off by 4e-3 in bf16 on the
    CPU and the H100), so the CPU checks saw an error the kernel under test does not make.
    Uncast, ``where`` promotes to float32: the scores' own precision on both paths."""
    return torch.where(kv_idx == n_keys, sink[h], score)


def compiled_flex(backend="inductor"):
    """``flex_attention`` compiled as the adapter runs it on CUDA (``dynamic=False``: every
    new shape, stride or captured constant is a recompile; ``COMPILE_KEY`` names them).
    ``backend`` is there for tests/test_flex_compile_key.py, which counts dynamo's compiles
    on the CPU with a counting backend through this same call."""
    import torch._dynamo  # lazy: ~1.5 s to import; only the CUDA path (and its test) compiles

    # A campaign draws many shapes; without room for them dynamo would fall back to
    # the eager path after 8 recompiles and we would no longer test the Triton kernels.
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 512)
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 512)
    no_donated_buffers()
    return torch.compile(flex_attention, dynamic=False, backend=backend)


def _flex_fn(device_type: str):
    if device_type != "cuda":
        return flex_attention
    if "compiled" not in _CACHE:
        _CACHE["compiled"] = compiled_flex()
    return _CACHE["compiled"]


_CACHE: dict = {}


class FlexAdapter(KernelAdapter):
    name = "flex"
    capability = CAPABILITY
    description = "torch FlexAttention (compiled Triton on CUDA), block-mask causal/window/varlen, sinks via score_mod"

    def __init__(self, gqa: bool = False, sparse: bool = False):
        if sparse:
            self.name = "flex-sparse"
            self.capability = SPARSE_CAPABILITY
            self.description = "torch FlexAttention with block-sparse BlockMasks and top-k selections"
        if gqa:
            self.name = "flex-gqa"
            self.capability = GQA_CAPABILITY
            self.description = "torch FlexAttention with enable_gqa=True (square dense problems)"

    def available(self) -> str | None:
        return FLEX_MISSING or cuda_reason()

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        return self.translate(inputs, grad=True)

    def translate(self, inputs: Inputs, grad: bool = True, flex_fn=None):
        """Forward on whatever device ``inputs`` live on. ``grad=False`` skips autograd, so
        the CPU (where FlexAttention has no backward) can check the translation. ``flex_fn``
        replaces the flex_attention callable (default: compiled on CUDA, eager elsewhere)."""
        p = inputs.problem
        dev = inputs.device
        leaves, lay = flex_leaves(inputs, grad)
        q = lay(leaves[0])
        mask_mod, n_keys = make_mask_mod(p, dev)
        sink, kk, vv = with_sink_column(inputs, lay(leaves[1]), lay(leaves[2]), grad)
        score_mod = make_score_mod(p, sink, n_keys, dev)

        B, Lq, Lk = q.shape[0], q.shape[2], kk.shape[2]
        block_mask = None
        if p.sparse:
            block_mask = sparse_block_mask(p, mask_mod, n_keys, B, Lq, Lk, dev)
        elif p.masked or p.varlen or p.sinks:
            block_mask = create_block_mask(mask_mod, B, None, Lq, Lk, device=str(dev))
        fn = flex_fn if flex_fn is not None else _flex_fn(dev.type)
        o, lse = call_flex(fn, q, kk, vv, score_mod, block_mask, p.scale, q.shape[1] != kk.shape[1])
        return flex_outputs(o, lse, p), (*leaves, sink, o, lay)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        q, k, v, sink, o, lay = ctx
        wrt = (q, k, v) + ((sink,) if sink is not None else ())
        grads = torch.autograd.grad(o, wrt, lay(laid_out(inputs, "do")), retain_graph=True, allow_unused=True)

        def back(t):  # gradients come in the leaves' shape: [T, H, D] or [B, S, H, D]
            return t.reshape(-1, t.shape[-2], t.shape[-1]).contiguous()

        dq = back(grads[0])
        dk, dv = (back(fold_kv_heads(g, p.heads_kv)) for g in grads[1:3])
        dsink = None
        if sink is not None and grads[3] is not None:
            dsink = grads[3].float()
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)


def flex_leaves(inputs: Inputs, grad: bool):
    """(the q, k, v leaves, ``lay``): the leaves are the laid-out memory itself (packed
    [T, H, D], or dense [B, S, H, D] views), never a copy; ``lay`` views one as flex's
    [B, H, S, D] ([1, H, T, D] for varlen)."""
    if inputs.problem.varlen:

        def lay(t):  # [T, H, D] -> [1, H, T, D]
            return t.transpose(0, 1).unsqueeze(0)
    else:

        def lay(t):  # [B, S, H, D] -> [B, H, S, D]
            return t.transpose(1, 2)

    leaves = tuple(laid_out(inputs, n).detach().requires_grad_(grad) for n in ("q", "k", "v"))
    return leaves, lay


def with_sink_column(inputs: Inputs, k, v, grad: bool):
    """(the sink leaf or None, K and V with the sink's zero key column appended where the
    Problem has sinks): the score_mod gives that column the sink's logit."""
    if not inputs.problem.sinks:
        return None, k, v
    sink = inputs.sink.detach().clone().float().requires_grad_(grad)
    zk = torch.zeros(*k.shape[:2], 1, k.shape[-1], dtype=k.dtype, device=inputs.device)
    zv = torch.zeros(*v.shape[:2], 1, v.shape[-1], dtype=v.dtype, device=inputs.device)
    return sink, torch.cat([k, zk], dim=2), torch.cat([v, zv], dim=2)


def flex_outputs(o, lse, p: Problem) -> Outputs:
    """flex's O and LSE ([B, H, S, ...]) as our Outputs (THD, natural-log LSE). No query
    token at all (every varlen query sequence empty): flex returns no LSE; every row is -inf."""
    if lse is None:
        lse = torch.full(o.shape[:-1], float("-inf"), dtype=torch.float32, device=o.device)
    if p.varlen:
        o_thd = o.detach()[0].transpose(0, 1)
        lse_thd = lse.detach()[0].transpose(0, 1)
    else:
        o_thd = o.detach().transpose(1, 2).reshape(p.total_q, p.heads_q, p.head_dim_v)
        lse_thd = lse_bhs_to_thd(lse.detach())
    return Outputs(o=o_thd.contiguous(), lse=normalize_lse(lse_thd, p).contiguous())


def call_flex(fn, q, k, v, score_mod, block_mask, scale, gqa):
    """``fn`` (flex_attention, compiled or not) returning (O, LSE), on either torch API."""
    if AuxRequest is not None:
        o, aux = fn(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=scale,
            enable_gqa=gqa,
            return_aux=AuxRequest(lse=True),
        )
        return o, aux.lse
    return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=gqa, return_lse=True)


def gqa():
    return FlexAdapter(gqa=True)


def sparse():
    return FlexAdapter(sparse=True)
