"""A blockwise FlashAttention-2-style attention forward and backward in plain torch.

This is a KERNEL UNDER TEST, written the way a tiled GPU kernel is written, not a
reference: the forward runs an online softmax over key tiles of ``block_n`` keys for
each query tile of ``block_m`` rows and produces O and LSE (natural log, sink
included); the backward preprocesses Delta_i = sum_j P_ij dP_ij (= rowsum(O * dO); see
``preprocess_delta`` for why it is recomputed from P and dP by default), then for each key tile
(outer loop) and query tile (inner loop) recomputes P = exp((S - m) - log l) from the
row max m and log row sum saved by the forward (LSE = m + log l) and accumulates

    dV += P^T dO,  dP = dO V^T,  dS = P * (dP - Delta),
    dK += dS^T Q * scale,  dQ_accum += dS K   (float32 workspace, scaled in a postprocess)

and dSink_h = -sum_i exp(sink_h - LSE_i) * Delta_i. Tiles are padded to full
``block_m`` x ``block_n`` like shared-memory tiles: padded query rows carry LSE=+inf
and Delta=0 so they contribute nothing, padded key columns are masked out. A block size of
None is one tile as long as the sequence, unpadded (whole rows: every GEMM over whole rows,
as a composite kernel such as PyTorch's math backend runs them).

Every Problem feature is supported: causal (both alignments), sliding windows (negative
bounds and crossed ones: rows with no key), softcap (``cap_logits`` on the scaled logits before
the mask, dS times 1 - tanh^2 in ``softcap_grad``), ALiBi (``alibi_bias``: -slope_h |i + offset - j|
per query head in float32, added after the cap in the softmax's units, forward and backward),
a relative-position bias table (``rel_bias_tile``: table[h][clamp(j - (i + offset), -R, R) + R],
looked up through ``rel_table`` and ``rel_index``, added with ALiBi's),
GQA/MQA (dK/dV summed over each group of query heads), varlen with zero-length
sequences and unused tail tokens, sinks, custom softmax scale, float32/float16/bfloat16
(computed in float32, outputs cast), and every memory layout of difftest/model/layouts.py
(inputs are read through their own strides and storage offset, never copied first).
Outputs are written into the given (poisoned) buffers, every element of them, and the
result is bitwise deterministic.

Hook points: each step a real kernel can get wrong is one small method
(``load``, ``kv_head_index``, ``allowed``, ``cap_logits``, ``softcap_grad``, ``alibi_slopes``,
``alibi_distance``, ``alibi_bias``, ``rel_table``, ``rel_index``, ``rel_bias_tile``, ``query_tiles``,
``key_tiles``, ``running_max``, ``rescale_factor``, ``stats_for_backward``, ``softmax_grad``,
``delta_pad_value``, ``dq_workspace``, ``reduce_dq``, ``dq_postprocess``, ``grad_scale``,
``reduce_group``, ``accumulate_kv``, ``dsink_rows``, ``store_lse``, ``forward_sink``, ``sparse_allowed``,
``selection_weight``, ...).
``kernels/mutants.py`` builds its fault-injected kernels by overriding exactly one or
two of them, so every mutant is a small, named deviation from this file.
"""

import contextlib
from dataclasses import replace

import torch

from difftest.errors import InputError
from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs, torch_dtype
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .masking import selected_blocks

BLOCK_M = 32  # query rows per tile
BLOCK_N = 16  # keys per tile

# Head dims include ones that are not a multiple of the 16-wide MMA tile (8, 24, 40, 59,
# 111) so tail bugs in the head dimension are reachable.
HEAD_DIMS = (8, 16, 24, 32, 40, 59, 64, 80, 96, 111, 128)

CAPABILITY = Capability(
    dtypes=("float32", "float16", "bfloat16"),
    head_dims_qk=HEAD_DIMS,
    head_dims_v=None,
    equal_head_dims=False,
    max_batch=8,
    max_seqlen=256,
    max_heads=16,
    gqa=True,
    seqlen_q_ne_k=True,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=True,
    negative_window=True,
    varlen=True,
    empty_seqs=True,
    pad_tail=True,
    sinks=True,
    softmax_scale=True,
    softcap=True,
    alibi=True,
    rel_bias=True,
    deterministic=True,
    poison=True,
    device="cpu",
    block_m=BLOCK_M,
    block_n=BLOCK_N,
    layouts=LAYOUTS,
)

F32 = torch.float32


@contextlib.contextmanager
def _one_thread():
    """Tiles are tiny: intra-op threads only add contention (20x slower on a shared
    2-core machine), so the kernel runs single-threaded and restores the setting."""
    n = torch.get_num_threads()
    if n != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)


def _tiles(n: int, block: int | None) -> list[tuple[int, int]]:
    """Full-size tiles [start, start + block) covering n rows (the last one padded); block
    None: one tile of exactly the n rows (whole rows, nothing padded)."""
    if block is None:
        return [(0, n)] if n else []
    return [(s, s + block) for s in range(0, n, block)]


def _padded_len(n: int, block: int | None) -> int:
    """Rows of n once padded to whole tiles (n itself for whole rows)."""
    return n if block is None else -(-n // block) * block


def _pad_rows(x: torch.Tensor, rows: int, value: float = 0.0) -> torch.Tensor:
    """Pad dim 1 of [H, n, ...] to ``rows`` with ``value`` (a tile's padded rows)."""
    n = x.shape[1]
    if rows == n:
        return x
    pad = torch.full((x.shape[0], rows - n, *x.shape[2:]), value, dtype=x.dtype, device=x.device)
    return torch.cat([x, pad], dim=1)


class BlockwiseAttention(KernelAdapter):
    """FlashAttention-2-style tiled forward/backward; see the module docstring."""

    name = "torch-blockwise"
    capability = CAPABILITY
    description = "blockwise FlashAttention-2-style forward+backward in plain torch (CPU)"

    delta_source = "p_dp"  # or "o_do" (FlashAttention-2's preprocess); see preprocess_delta
    DELTA_SOURCES = ("p_dp", "o_do")

    def __init__(self, block_m: int | None = BLOCK_M, block_n: int | None = BLOCK_N, delta_source: str | None = None):
        if any(b is not None and b < 1 for b in (block_m, block_n)):
            raise InputError(
                f"block_m={block_m}, block_n={block_n}: allowed ints >= 1, or None (whole rows: "
                f"one tile as long as the sequence)"
            )
        if delta_source is not None:
            if delta_source not in self.DELTA_SOURCES:
                raise InputError(f"delta_source={delta_source!r}: allowed {self.DELTA_SOURCES}")
            self.delta_source = delta_source
        self.block_m = block_m
        self.block_n = block_n

    def run(self, inputs: Inputs, out=None):
        """The kernel on ``inputs``' device: tensors the tiles create (masks, accumulators,
        index ranges) default to it, so the same code (and every mutant of it) runs on a GPU
        (``difftest mutants --device cuda``; the H200 run met CPU masks against CUDA scores)."""
        if torch.device(inputs.device) == torch.get_default_device():  # no mode: it would
            return super().run(inputs, out)  # add a Python hook to every torch call
        with torch.device(inputs.device):
            return super().run(inputs, out)

    # ------------------------------------------------------------------ hooks
    def load(self, inputs: Inputs, name: str, b: int) -> torch.Tensor:
        """Sequence ``b``'s rows of q, k, v or do, [len, heads, dim] in the input dtype, read
        from the memory the kernel was handed through its own strides and storage offset
        (any layout of difftest/model/layouts.py: head-major, head-dim slices, offsets, stride-0
        K/V heads, which then carry heads_q heads that all read the one stored head)."""
        return inputs.rows(name, b)

    def kv_head_index(self, p: Problem, device) -> torch.Tensor:
        """[heads_q] long: the key/value head each query head reads (GQA groups)."""
        return torch.arange(p.heads_q, device=device) // p.group

    def sequences(self, p: Problem) -> list[tuple[int, int, int, int, int]]:
        """(b, q0, sq, k0, sk) per sequence: the packed rows each sequence owns."""
        cq, ck = p.cu_seqlens_q, p.cu_seqlens_k
        return [(b, cq[b], p.seqlens_q[b], ck[b], p.seqlens_k[b]) for b in range(p.batch)]

    def skip_sequence(self, p: Problem, sq: int, sk: int) -> bool:
        """True to leave a sequence's rows untouched (the clean kernel never skips)."""
        return False

    def query_tiles(self, sq: int, phase: str) -> list[tuple[int, int]]:
        return _tiles(sq, self.block_m)

    def key_tiles(self, sk: int, phase: str) -> list[tuple[int, int]]:
        return _tiles(sk, self.block_n)

    def allowed(self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str) -> torch.Tensor:
        """[i1-i0, j1-j0] bool: query row i may attend key column j (tile coordinates
        inside one sequence; padded key columns j >= sk are never allowed)."""
        i = torch.arange(i0, i1).unsqueeze(1) + p.mask_offset(sq, sk)
        j = torch.arange(j0, j1).unsqueeze(0)
        ok = j < sk
        if p.causal:
            ok = ok & (j <= i)
        if p.window_right is not None:
            ok = ok & (j <= i + p.window_right)
        if p.window_left is not None:
            ok = ok & (j >= i - p.window_left)
        if p.sparse:
            ok = ok & self.sparse_allowed(p, i0, i1, j0, j1, sq, sk, phase)
        return ok

    def sparse_allowed(
        self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str
    ) -> torch.Tensor:
        """[i1-i0, j1-j0] bool: the tile's selected blocks of a sparse Problem (padded rows and
        columns take their last real block's; the caller masks padded columns)."""
        sp = p.sparsity
        sel = selected_blocks(p, sq, sk)
        # the selection is a host tensor; the tiles' tensors are made on the run's default device
        # (CUDA under --device cuda): index on the host, hand the tile over on that device
        qb = torch.clamp(torch.arange(i0, i1, device=sel.device), max=max(sq - 1, 0)) // sp.block_q
        kb = torch.clamp(torch.arange(j0, j1, device=sel.device), max=max(sk - 1, 0)) // sp.block_k
        if not sel.numel():
            return torch.zeros(i1 - i0, j1 - j0, dtype=torch.bool)
        return sel[qb][:, kb].to(torch.get_default_device())

    def selection_weight(
        self, s: torch.Tensor, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str
    ) -> torch.Tensor:
        """The masked scores of a tile as the softmax weighs them: unchanged (a key a top-k row
        selects twice counts once, difftest/model/sparsity.py)."""
        return s

    def logit_scale(self, p: Problem, phase: str) -> float:
        """Softmax scale applied to Q K^T when forming S (forward and backward)."""
        return p.scale

    def cap_logits(self, p: Problem, s: torch.Tensor, scale: float, phase: str):
        """(capped logits, d capped / d raw) of a tile's scaled logits ``s`` (before the mask):
        softcap * tanh(s / softcap) and 1 - tanh^2, with the cap in the units of ``s`` (``scale``
        is ``logit_scale``'s, which a log2 kernel folds log2 e into); (s, None) without a softcap."""
        if p.softcap is None:
            return s, None
        cap = p.softcap * scale / p.scale
        t = torch.tanh(s / cap)
        return t * cap, 1.0 - t * t

    def alibi_slopes(self, p: Problem, phase: str) -> torch.Tensor:
        """[heads_q] float32: each query head's ALiBi slope (FA2 reads alibi_slopes[bidh])."""
        return torch.tensor(p.alibi_slopes, dtype=F32)

    def alibi_distance(self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int) -> torch.Tensor:
        """[i1-i0, j1-j0] float32: |i + offset - j| of a tile, the mask's offset (its alignment)."""
        i = torch.arange(i0, i1).unsqueeze(1) + p.mask_offset(sq, sk)
        return (torch.arange(j0, j1).unsqueeze(0) - i).abs().to(F32)

    def alibi_bias(self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str):
        """[heads_q, i1-i0, j1-j0] float32: the ALiBi bias of a tile in the softmax's units
        (-slope * distance, then ``to_log_units``), added after the cap; None without ALiBi."""
        if p.alibi_slopes is None:
            return None
        bias = -self.alibi_slopes(p, phase).view(-1, 1, 1) * self.alibi_distance(p, i0, i1, j0, j1, sq, sk)
        return self.to_log_units(bias)

    def rel_table(self, p: Problem, phase: str) -> torch.Tensor:
        """[heads_q, 2R + 1] float32: the relative-position bias table, a row per query head."""
        return torch.tensor(p.rel_bias, dtype=F32)

    def rel_index(self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int) -> torch.Tensor:
        """[i1-i0, j1-j0] int64: a tile's table column clamp(j - (i + offset), -R, R) + R."""
        r = p.rel_distance
        i = torch.arange(i0, i1).unsqueeze(1) + p.mask_offset(sq, sk)
        return (torch.arange(j0, j1).unsqueeze(0) - i).clamp(-r, r) + r

    def rel_bias_tile(self, p: Problem, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str):
        """[heads_q, i1-i0, j1-j0] float32: the relative-position bias of a tile (the table looked
        up at ``rel_index``), not yet in the softmax's units; None without a table."""
        if p.rel_bias is None:
            return None
        return self.rel_table(p, phase)[:, self.rel_index(p, i0, i1, j0, j1, sq, sk)]

    def biased(self, p: Problem, s: torch.Tensor, i0: int, i1: int, j0: int, j1: int, sq: int, sk: int, phase: str):
        """The tile's (capped) logits ``s`` plus its ALiBi bias and its relative-position bias (``s``
        itself without either)."""
        bias = self.alibi_bias(p, i0, i1, j0, j1, sq, sk, phase)
        rel = self.rel_bias_tile(p, i0, i1, j0, j1, sq, sk, phase)
        if rel is not None:
            rel = self.to_log_units(rel)
            bias = rel if bias is None else bias + rel
        return s if bias is None else s + bias

    def softcap_grad(self, ds: torch.Tensor, dcap: torch.Tensor | None) -> torch.Tensor:
        """dS of the raw logits from dS of the capped ones: times 1 - tanh^2 (as is without a cap)."""
        return ds if dcap is None else ds * dcap

    def gemm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Every tile GEMM (batched a @ b in float32): the CPU BLAS's summation order here;
        ``kernels/variants.py`` swaps in a GPU GEMM's."""
        return torch.matmul(a, b)

    def operand(self, t: torch.Tensor, which: str) -> torch.Tensor:
        """A float32 tile as the next GEMM consumes it (``which``: "p_fwd" for P V, "p_dv" for
        P^T dO, "ds" for dS K and dS^T Q): unrounded here; a tensor-core kernel rounds it to
        the input dtype (``kernels/variants.py``)."""
        return t

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        """The exponential of the softmax, in the base of ``LOG_BASE`` units (e: exp)."""
        return torch.exp(x)

    def log(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)

    def to_log_units(self, x: torch.Tensor) -> torch.Tensor:
        """Natural-log logits (the sink) in the units the softmax works in (here: as is)."""
        return x

    def lse_natural(self, lse: torch.Tensor) -> torch.Tensor:
        """The LSE in the softmax's units -> the natural-log LSE the kernel returns."""
        return lse

    def running_max(self, m: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Online-softmax running row max after seeing tile logits ``s``."""
        return torch.maximum(m, s.amax(dim=-1))

    def rescale_factor(self, m: torch.Tensor, m_new: torch.Tensor, s: torch.Tensor, j0: int) -> torch.Tensor:
        """exp(m - m_new): what the running row sum and accumulator are multiplied by when the
        key tile starting at key ``j0`` (masked logits ``s``) moves the running max from ``m`` to
        ``m_new`` (0 where it is still -inf)."""
        return self.exp(m - m_new)

    def normalise(self, acc: torch.Tensor, l: torch.Tensor) -> torch.Tensor:
        """O = acc / l; a row that saw nothing (l == 0) gives O = 0."""
        return torch.where(l.unsqueeze(-1) > 0, acc / l.clamp_min(1e-38).unsqueeze(-1), torch.zeros_like(acc))

    def stats_for_backward(self, m: torch.Tensor, logl: torch.Tensor):
        """Row max and log row sum as the backward uses them in P = exp((S - m) - logl):
        a row that saw nothing (logl = -inf) gets logl = +inf so its P is 0."""
        empty = torch.isneginf(logl)
        return (
            torch.where(empty, torch.zeros_like(m), m),
            torch.where(empty, torch.full_like(logl, float("inf")), logl),
        )

    def stats_rows(self, stats: torch.Tensor, q0: int, sq: int, b: int) -> torch.Tensor:
        """[sq, Hq, 2] saved (row max, log row sum) of a sequence's rows, as the backward
        reads them."""
        return stats[q0 : q0 + sq]

    def softmax_grad(
        self, pt: torch.Tensor, dp: torch.Tensor, delta: torch.Tensor, i0: int, i1: int, j0: int, j1: int
    ) -> torch.Tensor:
        """dS = P * (dP - Delta) of one (query tile, key tile) pair: rows i0:i1 and key columns
        j0:j1 of the sequence, ``delta`` the rows' Delta as [H, i1 - i0, 1]."""
        return pt * (dp - delta)

    def delta_pad_value(self) -> float:
        """Delta of a query tile's padded rows (beyond the sequence end)."""
        return 0.0

    def lse_pad_value(self) -> float:
        """log row sum of a query tile's padded rows: +inf makes their P zero."""
        return float("inf")

    def dq_workspace(self, shape: tuple, device) -> torch.Tensor:
        """The float32 dQ accumulator, zeroed for every call."""
        return torch.zeros(shape, dtype=F32, device=device)

    def reduce_dq(self, acc: torch.Tensor, parts: list[tuple[int, int, torch.Tensor]]) -> None:
        """Add each (row0, row1, partial dQ) tile contribution into ``acc`` [Hq, rows, D],
        in launch order (fixed order: deterministic)."""
        for r0, r1, part in parts:
            acc[:, r0:r1] += part

    def grad_scale(self, p: Problem, which: str) -> float:
        """The softmax scale applied to dK (inside the loop) or dQ (in the postprocess)."""
        return p.scale

    def dq_postprocess(self, acc: torch.Tensor, p: Problem) -> torch.Tensor:
        """float32 accumulator -> dQ in float32 (before the cast to the problem dtype)."""
        return acc.to(F32) * self.grad_scale(p, "dq")

    def dq_columns(self, p: Problem) -> int:
        """How many head-dim columns of dQ the epilogue stores."""
        return p.head_dim_qk

    def dq_heads(self, p: Problem) -> list[int]:
        """Query heads whose dQ the epilogue stores."""
        return list(range(p.heads_q))

    def accumulate_kv(self, acc: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
        """A query tile's dK or dV product added into its key tile's float32 accumulator."""
        return acc + part

    def reduce_group(self, grad_h: torch.Tensor, idx: torch.Tensor, heads_kv: int) -> torch.Tensor:
        """[Hq, n, D] per-query-head dK/dV -> [Hkv, n, D]: sum over each GQA group."""
        return torch.stack([grad_h[idx == g].sum(dim=0) for g in range(heads_kv)])

    def sink_for_heads(self, sink: torch.Tensor, p: Problem) -> torch.Tensor:
        """[heads_q] sink logit of each query head."""
        return sink

    def forward_sink(self, sink: torch.Tensor | None) -> torch.Tensor | None:
        """The sink logits the forward's softmax (O and the saved LSE) includes: all of them."""
        return sink

    def dsink_rows(self, sq: int) -> int:
        """How many rows of a sequence the dSink reduction covers."""
        return sq

    def dsink_sign(self) -> float:
        return -1.0

    def store_lse(self, sk: int) -> bool:
        """Whether the epilogue stores the LSE of a sequence with ``sk`` keys (always)."""
        return True

    def write_lse_padding(self, lse: torch.Tensor, rows: slice) -> None:
        """Rows beyond the last sequence (pad_tail) see nothing: LSE = -inf."""
        lse[rows] = float("-inf")

    # ------------------------------------------------------------------ forward
    def forward(self, inputs: Inputs, out: Outputs | None = None):
        with _one_thread():
            return self._forward(inputs, out)

    def _forward(self, inputs: Inputs, out: Outputs | None):
        p = inputs.problem
        dev = inputs.device
        dt = torch_dtype(p.dtype)
        if out is None:
            out = Outputs.poisoned(p, dt, dev)
        o_buf, lse_buf = out.o, out.lse
        # Saved for the backward, like FlashAttention-1's (m, l): the row max and the log
        # row sum kept apart, so P = exp((S - m) - log l) keeps full float32 precision
        # when logits are large (exp(S - LSE) loses |LSE| * eps). Never-written rows
        # hold NaN, as uninitialised memory would.
        stats = torch.full((p.total_q, p.heads_q, 2), float("nan"), dtype=F32, device=dev)
        idx = self.kv_head_index(p, dev)
        sink = None
        if p.sinks:
            sink = self.forward_sink(self.sink_for_heads(inputs.sink.to(F32), p))
            sink = None if sink is None else self.to_log_units(sink)
        for b, q0, sq, k0, sk in self.sequences(p):
            if self.skip_sequence(p, sq, sk) or sq == 0:
                continue
            q = self.load(inputs, "q", b).to(F32).transpose(0, 1)  # [Hq, sq, D]
            k = self.load(inputs, "k", b).to(F32)[:, idx].transpose(0, 1)  # [Hq, sk, D]
            v = self.load(inputs, "v", b).to(F32)[:, idx].transpose(0, 1)
            o, lse, m, logl, rows = self._forward_sequence(p, q, k, v, sink, sq, sk)
            stats[q0 : q0 + sq][rows] = torch.stack([m, logl], dim=-1).transpose(0, 1)[rows]
            o_buf[q0 : q0 + sq][rows] = o.transpose(0, 1)[rows].to(dt)
            if self.store_lse(sk):
                lse_buf[q0 : q0 + sq][rows] = self.lse_natural(lse).transpose(0, 1)[rows]
        tail = slice(p.cu_seqlens_q[-1], p.total_q)
        o_buf[tail] = 0
        self.write_lse_padding(lse_buf, tail)
        return Outputs(o=o_buf, lse=lse_buf), {"stats": stats}

    def _forward_sequence(self, p, q, k, v, sink, sq, sk):
        H, dv = q.shape[0], v.shape[-1]
        scale = self.logit_scale(p, "fwd")
        q_tiles = self.query_tiles(sq, "fwd")
        k_tiles = self.key_tiles(sk, "fwd")
        mp = max((t[1] for t in q_tiles), default=0)
        np_ = max((t[1] for t in k_tiles), default=0)
        qp, kp, vp = _pad_rows(q, max(mp, sq)), _pad_rows(k, max(np_, sk)), _pad_rows(v, max(np_, sk))
        o = torch.zeros(H, max(mp, sq), dv, dtype=F32)
        lse = torch.full((H, max(mp, sq)), float("-inf"), dtype=F32)
        m_out = torch.zeros(H, max(mp, sq), dtype=F32)
        logl = torch.full((H, max(mp, sq)), float("-inf"), dtype=F32)
        rows = torch.zeros(sq, dtype=torch.bool)
        for i0, i1 in q_tiles:
            n = i1 - i0
            if sink is not None:
                m = sink.view(H, 1).expand(H, n).clone()
                l = torch.ones(H, n, dtype=F32)
            else:
                m = torch.full((H, n), float("-inf"), dtype=F32)
                l = torch.zeros(H, n, dtype=F32)
            acc = torch.zeros(H, n, dv, dtype=F32)
            for j0, j1 in k_tiles:
                s = self.gemm(qp[:, i0:i1], kp[:, j0:j1].transpose(1, 2)) * scale
                s = self.cap_logits(p, s, scale, "fwd")[0]
                s = self.biased(p, s, i0, i1, j0, j1, sq, sk, "fwd")
                s = s.masked_fill(~self.allowed(p, i0, i1, j0, j1, sq, sk, "fwd"), float("-inf"))
                s = self.selection_weight(s, p, i0, i1, j0, j1, sq, sk, "fwd")
                m_new = self.running_max(m, s)
                m_safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
                alpha = self.rescale_factor(m, m_safe, s, j0)
                pt = self.exp(s - m_safe.unsqueeze(-1))
                l = l * alpha + pt.sum(dim=-1)
                acc = acc * alpha.unsqueeze(-1) + self.gemm(self.operand(pt, "p_fwd"), vp[:, j0:j1])
                m = m_new
            m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
            o[:, i0:i1] = self.normalise(acc, l)
            lse[:, i0:i1] = torch.where(l > 0, m_safe + self.log(l), torch.full_like(l, float("-inf")))
            m_out[:, i0:i1] = m_safe
            logl[:, i0:i1] = self.log(l)
            rows[i0 : min(i1, sq)] = True
        return o[:, :sq], lse[:, :sq], m_out[:, :sq], logl[:, :sq], rows

    # ------------------------------------------------------------------ backward
    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        with _one_thread():
            return self._backward(inputs, fwd, ctx, out)

    def _backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None) -> Outputs:
        p = inputs.problem
        dev = inputs.device
        dt = torch_dtype(p.dtype)
        if out is None:
            out = Outputs.poisoned(p, dt, dev)
        dq_buf, dk_buf, dv_buf = out.dq, out.dk, out.dv
        idx = self.kv_head_index(p, dev)
        sink = self.to_log_units(self.sink_for_heads(inputs.sink.to(F32), p)) if p.sinks else None
        if isinstance(ctx, dict) and "stats" in ctx:
            stats = ctx["stats"]
        else:  # called with another forward's outputs: fall back to (m, log l) = (LSE, 0)
            stats = torch.stack([fwd.lse.to(F32), torch.zeros_like(fwd.lse, dtype=F32)], dim=-1)
            stats[..., 1] = torch.where(torch.isneginf(stats[..., 0]), float("-inf"), 0.0)
        dsink = torch.zeros(p.heads_q, dtype=F32) if p.sinks else None
        seqs = [s for s in self.sequences(p) if not self.skip_sequence(p, s[2], s[4])]
        padded = [_padded_len(sq, self.block_m) for _, _, sq, _, _ in seqs]
        ws = self.dq_workspace((p.heads_q, max(1, sum(padded)), p.head_dim_qk), dev)
        off = 0
        for (b, q0, sq, k0, sk), mp in zip(seqs, padded):
            q = self.load(inputs, "q", b).to(F32).transpose(0, 1)
            do = self.load(inputs, "do", b).to(F32).transpose(0, 1)
            o = fwd.o[q0 : q0 + sq].to(F32).transpose(0, 1)
            st = self.stats_rows(stats, q0, sq, b).to(F32).transpose(0, 1)  # [Hq, sq, 2]
            m, logl = self.stats_for_backward(st[..., 0], st[..., 1])
            k = self.load(inputs, "k", b).to(F32)[:, idx].transpose(0, 1)
            v = self.load(inputs, "v", b).to(F32)[:, idx].transpose(0, 1)
            delta = self.preprocess_delta(p, q, k, v, do, o, m, logl, sq, sk)  # [Hq, sq]
            if sink is not None and sq:
                n = min(self.dsink_rows(sq), sq)
                p_sink = self.exp((sink.view(-1, 1) - m[:, :n]) - logl[:, :n])
                dsink += self.dsink_sign() * (p_sink * delta[:, :n]).sum(dim=-1)
            dk_h, dv_h = self._backward_sequence(p, q, k, v, do, m, logl, delta, ws[:, off : off + mp], sq, sk)
            acc = ws[:, off : off + sq]
            off += mp
            dq = self.dq_postprocess(acc, p).to(dt)  # [Hq, sq, D]
            cols = min(self.dq_columns(p), p.head_dim_qk)
            for h in self.dq_heads(p):
                dq_buf[q0 : q0 + sq, h, :cols] = dq[h, :, :cols]
            dk_buf[k0 : k0 + sk] = self.reduce_group(dk_h, idx, p.heads_kv).transpose(0, 1).to(dt)
            dv_buf[k0 : k0 + sk] = self.reduce_group(dv_h, idx, p.heads_kv).transpose(0, 1).to(dt)
        dq_buf[p.cu_seqlens_q[-1] :] = 0
        dk_buf[p.cu_seqlens_k[-1] :] = 0
        dv_buf[p.cu_seqlens_k[-1] :] = 0
        res = Outputs(o=fwd.o, lse=fwd.lse, dq=dq_buf, dk=dk_buf, dv=dv_buf)
        if p.sinks:
            out.dsink[:] = dsink
            res.dsink = out.dsink
        return res

    def preprocess_delta(self, p, q, k, v, do, o, m, logl, sq, sk) -> torch.Tensor:
        """Delta_i = sum_j P_ij dP_ij = rowsum(O * dO), [Hq, sq] float32.

        ``delta_source = "o_do"`` is FlashAttention-2's preprocess, rowsum(O * dO) from the
        stored O. ``"p_dp"`` (the default) recomputes rowsum(P * dP) over the very tiles
        (same shapes, same matmuls) the main loop uses, as autograd's softmax backward
        does: when the softmax saturates (P one-hot: one visible key, or logits in the
        hundreds) dP_ij - Delta_i is then an exact cancellation instead of the difference
        of two differently rounded dot products, whose error (~eps |dO| |V|) dQ and dK
        amplify by |K| or |Q| times the scale."""
        if self.delta_source == "o_do":
            return (o * do).sum(dim=-1)
        scale = self.logit_scale(p, "bwd")
        qp, dop, kp, vp, mpad, logl_p = self._padded(q, k, v, do, m, logl, sq, sk)
        delta = torch.zeros(q.shape[0], qp.shape[1], dtype=F32)
        for i0, i1 in self.query_tiles(sq, "bwd"):
            for j0, j1 in self.key_tiles(sk, "bwd"):
                pt, dp, _ = self._p_dp(p, qp, dop, kp, vp, mpad, logl_p, scale, i0, i1, j0, j1, sq, sk)
                delta[:, i0:i1] += (pt * dp).sum(dim=-1)
        return delta[:, :sq]

    def _padded(self, q, k, v, do, m, logl, sq, sk):
        """Operands padded to whole tiles: zero rows; padded query rows get m = 0 and
        log l = lse_pad_value() (+inf: P = 0)."""
        mp = max(_padded_len(sq, self.block_m), sq)
        np_ = max(_padded_len(sk, self.block_n), sk)
        return (
            _pad_rows(q, mp),
            _pad_rows(do, mp),
            _pad_rows(k, np_),
            _pad_rows(v, np_),
            _pad_rows(m, mp, 0.0),
            _pad_rows(logl, mp, self.lse_pad_value()),
        )

    def _p_dp(self, p, qp, dop, kp, vp, mpad, logl_p, scale, i0, i1, j0, j1, sq, sk):
        """Recomputed P, dP = dO V^T and the softcap's 1 - tanh^2 (None without one) of one
        (query tile, key tile) pair."""
        s = self.gemm(qp[:, i0:i1], kp[:, j0:j1].transpose(1, 2)) * scale
        s, dcap = self.cap_logits(p, s, scale, "bwd")
        s = self.biased(p, s, i0, i1, j0, j1, sq, sk, "bwd")
        s = s.masked_fill(~self.allowed(p, i0, i1, j0, j1, sq, sk, "bwd"), float("-inf"))
        s = self.selection_weight(s, p, i0, i1, j0, j1, sq, sk, "bwd")
        pt = self.exp((s - mpad[:, i0:i1].unsqueeze(-1)) - logl_p[:, i0:i1].unsqueeze(-1))
        dp = self.gemm(dop[:, i0:i1], vp[:, j0:j1].transpose(1, 2))
        return pt, dp, dcap

    def _backward_sequence(self, p, q, k, v, do, m, logl, delta, ws, sq, sk):
        """One sequence: returns per-query-head dK, dV [Hq, sk, D]; dQ goes into ``ws``."""
        H, d, dv_ = q.shape[0], q.shape[-1], v.shape[-1]
        scale = self.logit_scale(p, "bwd")
        dk_scale = self.grad_scale(p, "dk")
        qp, dop, kp, vp, mpad, logl_p = self._padded(q, k, v, do, m, logl, sq, sk)
        deltap = _pad_rows(delta, qp.shape[1], self.delta_pad_value())
        dk = torch.zeros(H, kp.shape[1], d, dtype=F32)
        dv = torch.zeros(H, kp.shape[1], dv_, dtype=F32)
        parts = []
        for j0, j1 in self.key_tiles(sk, "bwd"):
            for i0, i1 in self.query_tiles(sq, "bwd"):
                pt, dp, dcap = self._p_dp(p, qp, dop, kp, vp, mpad, logl_p, scale, i0, i1, j0, j1, sq, sk)
                dv[:, j0:j1] = self.accumulate_kv(
                    dv[:, j0:j1], self.gemm(self.operand(pt, "p_dv").transpose(1, 2), dop[:, i0:i1])
                )
                ds = self.softcap_grad(self.softmax_grad(pt, dp, deltap[:, i0:i1].unsqueeze(-1), i0, i1, j0, j1), dcap)
                ds = self.operand(ds, "ds")
                dk[:, j0:j1] = self.accumulate_kv(dk[:, j0:j1], self.gemm(ds.transpose(1, 2), qp[:, i0:i1]) * dk_scale)
                parts.append((i0, i1, self.gemm(ds, kp[:, j0:j1])))
        self.reduce_dq(ws, parts)
        return dk[:, :sk], dv[:, :sk]


# The blockwise kernel with sparse masks declared (difftest/model/sparsity.py): block masks at its
# own tiles, at tiles unaligned with them and at FlexAttention's default 128 x 128; top-k per
# query token over key tokens and over 16-key blocks, and per 16-row query block. A kernel of its
# own (``difftest.kernels.blockwise:SparseBlockwiseAttention``) so that torch-blockwise's draws,
# and every mutant's, stay what they were; the sparse mutants deviate from it.
SPARSE_CAPABILITY = replace(
    CAPABILITY,
    block_sparse=((BLOCK_M, BLOCK_N), (8, 24), (16, 16), (128, 128)),
    topk_sparse=((1, 1), (1, BLOCK_N), (16, 8)),
)


class SparseBlockwiseAttention(BlockwiseAttention):
    """The blockwise kernel, declaring block-sparse masks and top-k selections (``allowed``
    serves every Problem's)."""

    name = "torch-blockwise-sparse"
    capability = SPARSE_CAPABILITY
    description = "blockwise FlashAttention-2-style forward+backward in plain torch (CPU), block-sparse and top-k"


def make() -> BlockwiseAttention:
    return BlockwiseAttention()
