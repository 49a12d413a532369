"""cuDNN's fused SDPA forward and backward, called directly through ``nvidia-cudnn-frontend``.

One cuDNN graph per configuration: ``pygraph.sdpa`` (forward, O and the softmax stats) and
``pygraph.sdpa_backward`` (dQ, dK, dV and dSink), built once and cached (building runs
cuDNN's heuristics and compiles the engine, charged to difftest's "compile" phase), then
executed on the laid-out memory of each case.

Conventions, mapped here and nowhere else:
- dense problems: q/k/v/dO are the [B, S, H, D] views of the Problem, handed to cuDNN as
  [B, H, S, D] dims with the BSHD strides (cuDNN takes any 4-D strides);
- varlen problems: the packed [T, H, D] buffers with THD ragged offsets (element offsets of
  each sequence, ``cu_seqlens * H * D``) and the padding mask with the per-sequence lengths;
  the packed buffers may be longer than the last offset (``pad_tail``);
- masks: ``diagonal_alignment`` TOP_LEFT / BOTTOM_RIGHT is the Problem's ``align``; key j is
  visible to query i iff ``i + off - left_bound < j <= i + off + right_bound`` (cuDNN's
  reference, test/python/sdpa/fp16_ref.py: ``tril_(-left_bound)`` and
  ``triu_(1 + right_bound)``), so ``right_bound = window_right`` (0 when causal, the smaller
  of the two when both) and ``left_bound = window_left + 1``;
- sinks: cuDNN's ``sink_token`` [1, H, 1, 1] float32 joins the softmax max and denominator,
  unscaled, as difftest's sink does; ``dSink_token`` is dsink;
- LSE: cuDNN's stats are ``max + log(sum exp)`` of the scaled logits, natural log, sink
  included (the same reference) -- difftest's LSE as it is.
Output buffers are zero-filled (LSE -inf) before each call, so rows cuDNN does not own (the
unused tail of a packed buffer, the keys of a sequence without queries) read as difftest's
convention for them; every row inside a sequence is what cuDNN wrote. A row cuDNN leaves
unwritten therefore reads as zero, not as garbage (the adapter does not take difftest's
NaN-poisoned buffers, ``Capability.poison`` stays False).
"""

import abc
import time
from dataclasses import dataclass

import torch

from difftest.execute import timing
from difftest.execute.adapter import KernelAdapter, KernelUnavailable
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import cuda_reason, lse_bhs_to_thd, module_reason, normalize_lse, sm_reason

# The contract, as nvidia-cudnn-frontend 1.32.0's own code states it (the wheel's headers,
# include/cudnn_frontend/node/{scaled_dot_product_flash_attention.h, sdpa_support_surface.h};
# the Python bindings' arguments in the NVIDIA/cudnn-frontend repository, python/pygraph/sdpa.cpp;
# read for this capability, not inferred from runs). The backend on the H200 is cuDNN 9.19
# (torch 2.11's), sm90:
# - head dims (backward, Hopper): d_qk and d_v each <= 256 and a multiple of 8, independently
#   (scaled_dot_product_flash_attention.h:1385-1401, "Num hidden_dim should be less than or
#   equal to 256"); the forward asks a multiple of 8 (sdpa_support_surface.h:309).
# - dtypes: fp16/bf16 I/O (the HALF mma core mode); float32 I/O has no fused path
#   (sdpa_support_surface.h:442, "Unsupported mma core mode").
# - GQA/MQA: h_q % h_k == 0 and h_q % h_v == 0 (sdpa_support_surface.h:123; backward
#   scaled_dot_product_flash_attention.h:1445).
# - masks: diagonal bands with TOP_LEFT or BOTTOM_RIGHT alignment (pygraph/sdpa.cpp:1079-1081
#   for sdpa, 1159-1161 for sdpa_backward); right_bound >= 0 (flash_attention.h:1535), left_bound
#   > 0 (flash_attention.h:1513); bottom-right masks and sliding windows need max_s_q <= max_s_kv
#   unless the padding mask is on (flash_attention.h:1500 and 1521, sdpa_support_surface.h:182
#   and 323): the adapter then turns the padding mask on with the full lengths (the interface's
#   own remedy), so the capability keeps s_q > s_kv.
# - ragged/THD: ragged offsets need the padding mask (sdpa_support_surface.h:164), Hopper or
#   newer (sdpa_support_surface.h:438); bounds with ragged only with the padding mask
#   (flash_attention.h:1526). Zero-length sequences are not claimed: the frontend does not
#   check them, but cudnn-frontend's own tests gate them on cuDNN >= 9.25 ("zero sequence
#   length SDPA requires cuDNN >= 9.25.0", test_sdpa_edge_cases.py) and the H200 has 9.19; a
#   batch whose every query sequence is empty killed the process there (SIGFPE in
#   create_execution_plans, results/bugs/cudnn/REPORT-zero-seqlen-sigfpe.md).
# - sinks: sink_token from cuDNN 9.13 (flash_attention.h:339), dSink_token in the backward
#   (pygraph/sdpa.cpp:1169-1170).
# - the Stats tensor the backward reads must be packed BHSD below cuDNN 9.26 when not ragged
#   (flash_attention.h:1570-1585): the adapter's dense stats buffer is [B, H, S, 1].
# - use_deterministic_algorithm (pygraph/sdpa.cpp:1164) is restricted on Blackwell only
#   (flash_attention.h:1550); on Hopper the ``cudnn`` adapter asks for it and claims determinism.
# - layouts: cuDNN takes 4-D dims and strides; ragged tensors need the packed THD strides.
#   The adapter declares the contiguous layout only.
# - combinations the Capability's fields cannot say are in ``refusal`` (each with its line) and
#   excluded through ``CudnnCapability.excludes``, so a campaign skips them with the reason.
# - max_seqlen / max_heads / max_batch below are campaign bounds (GPU time), not cuDNN's.
_DIMS = tuple(range(8, 257, 8))

COMPILE_KEY = (
    "dtype",
    "batch",
    "seqlen_q",
    "seqlen_k",
    "heads_q",
    "heads_kv",
    "head_dim_qk",
    "head_dim_v",
    "causal",
    "align",
    "window_left",
    "window_right",
    "sinks",
    "softmax_scale",
    "pad_tail",
)


@dataclass(frozen=True)
class CudnnCapability(Capability):
    """The declared capability plus the interface's refusals of field combinations."""

    def excludes(self, p: Problem) -> str | None:
        return super().excludes(p) or refusal(p)


def _capability(deterministic: bool) -> Capability:
    return CudnnCapability(
        dtypes=("float16", "bfloat16"),
        head_dims_qk=_DIMS,
        head_dims_v=_DIMS,
        equal_head_dims=False,
        max_batch=8,
        max_seqlen=4096,
        max_heads=32,
        gqa=True,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        varlen=True,
        empty_seqs=False,
        pad_tail=True,
        sinks=True,
        outputs=("o", "lse", "dq", "dk", "dv", "dsink"),
        deterministic=deterministic,
        device="cuda",
        block_m=128,
        block_n=128,
        compile_key=COMPILE_KEY,
    )


def refusal(p: Problem) -> str | None:
    """Why cuDNN's interface refuses ``p`` although the Capability's fields cannot say so, or None."""
    if p.max_seqlen_q == 1 and p.max_seqlen_k == 1:
        return "cuDNN's SDPA backward refuses s_q == s_kv == 1 (scaled_dot_product_flash_attention.h:1353)"
    if p.sinks and p.max_seqlen_q == 1:
        return "cuDNN refuses sink_token with s_q == 1 (decode only mode, sdpa_support_surface.h:345-360)"
    if p.sinks and p.varlen:
        return (
            "cuDNN < 9.26 refuses the backward with ragged offsets and a sink token "
            "(scaled_dot_product_flash_attention.h:1374-1379)"
        )
    return None


def bounds(p: Problem) -> tuple[int | None, int | None]:
    """(left_bound, right_bound) of cuDNN's diagonal band for ``p`` (None = unbounded)."""
    rights = ([0] if p.causal else []) + ([p.window_right] if p.window_right is not None else [])
    right = min(rights) if rights else None
    left = p.window_left + 1 if p.window_left is not None else None
    return left, right


def needs_padding_mask(p: Problem) -> bool:
    """Varlen always; a dense problem when its mask is bottom-right aligned or windowed and
    s_q > s_kv (cuDNN needs the padding mask there, flash_attention.h:1222 and 1243)."""
    if p.varlen:
        return True
    left, right = bounds(p)
    bottom_right = p.masked and p.align == "bottom_right"
    return p.seqlen_q > p.seqlen_k and (bottom_right or left is not None)


def graph_key(p: Problem, deterministic: bool) -> tuple:
    """What a built graph depends on (its dims, masks, scale): varlen graphs depend on the
    longest sequences and the buffer lengths, not on each length (those are tensors)."""
    lengths = (p.max_seqlen_q, p.max_seqlen_k, p.total_q, p.total_k) if p.varlen else (p.seqlen_q, p.seqlen_k)
    return (
        p.dtype,
        p.varlen,
        p.batch,
        lengths,
        p.heads_q,
        p.heads_kv,
        p.head_dim_qk,
        p.head_dim_v,
        bounds(p),
        p.align if p.masked else None,
        p.sinks,
        p.scale,
        needs_padding_mask(p),
        deterministic,
    )


def _cudnn():
    try:
        import cudnn  # lazy: nvidia-cudnn-frontend is optional; the adapter loads and says so without it
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise KernelUnavailable(f"nvidia-cudnn-frontend does not import: {e}") from None
    return cudnn


class _Graphs:
    """The forward and backward graph of one configuration, with its tensor handles."""

    def __init__(self, cudnn, handle, p: Problem, deterministic: bool):
        self.p = p
        io = {"float16": cudnn.data_type.HALF, "bfloat16": cudnn.data_type.BFLOAT16}[p.dtype]
        f32, i32, i64 = cudnn.data_type.FLOAT, cudnn.data_type.INT32, cudnn.data_type.INT64
        b, hq, hk = p.batch, p.heads_q, p.heads_kv
        sq, sk = p.max_seqlen_q, p.max_seqlen_k
        dqk, dv = p.head_dim_qk, p.head_dim_v
        left, right = bounds(p)
        align = (
            cudnn.diagonal_alignment.BOTTOM_RIGHT if p.align == "bottom_right" else cudnn.diagonal_alignment.TOP_LEFT
        )
        padding = needs_padding_mask(p)

        def bhsd(h, s, d):  # [B, H, S, D] dims over BSHD / packed THD memory
            return dict(dim=(b, h, s, d), stride=(s * h * d, d, h * d, 1))

        def make(g, sinks_out: bool):
            t = {}
            t["q"] = g.tensor(name="q", data_type=io, **bhsd(hq, sq, dqk))
            t["k"] = g.tensor(name="k", data_type=io, **bhsd(hk, sk, dqk))
            t["v"] = g.tensor(name="v", data_type=io, **bhsd(hk, sk, dv))
            if padding:
                t["seq_q"] = g.tensor(name="seq_q", dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i32)
                t["seq_k"] = g.tensor(name="seq_k", dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i32)
            if p.varlen:
                for n in ("off_q", "off_k", "off_v", "off_o", "off_s"):
                    t[n] = g.tensor(name=n, dim=(b + 1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i64)
                t["q"].set_ragged_offset(t["off_q"])
                t["k"].set_ragged_offset(t["off_k"])
                t["v"].set_ragged_offset(t["off_v"])
            if p.sinks:
                t["sink"] = g.tensor(name="sink", dim=(1, hq, 1, 1), stride=(hq, 1, 1, 1), data_type=f32)
                if sinks_out:
                    t["dsink"] = g.tensor(name="dsink", dim=(1, hq, 1, 1), stride=(hq, 1, 1, 1), data_type=f32)
            return t

        mask = dict(diagonal_band_left_bound=left, diagonal_band_right_bound=right, diagonal_alignment=align)
        # ragged: [T, H] memory with per-sequence offsets; dense: packed BHSD [B, H, S, 1], the only
        # non-ragged Stats layout the backward reads below cuDNN 9.26 (flash_attention.h:1570-1585)
        stats_dims = dict(dim=(b, hq, sq, 1), stride=(sq * hq, 1, hq, 1) if p.varlen else (hq * sq, sq, 1, 1))

        fg = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
        ft = make(fg, sinks_out=False)
        o, stats = fg.sdpa(
            name="sdpa",
            q=ft["q"],
            k=ft["k"],
            v=ft["v"],
            generate_stats=True,
            attn_scale=p.scale,
            use_padding_mask=padding,
            seq_len_q=ft.get("seq_q"),
            seq_len_kv=ft.get("seq_k"),
            sink_token=ft.get("sink"),
            **mask,
        )
        o.set_output(True).set_data_type(io).set_dim((b, hq, sq, dv)).set_stride(bhsd(hq, sq, dv)["stride"])
        stats.set_output(True).set_data_type(f32).set_dim(stats_dims["dim"]).set_stride(stats_dims["stride"])
        if p.varlen:
            o.set_ragged_offset(ft["off_o"])
            stats.set_ragged_offset(ft["off_s"])
        ft["o"], ft["stats"] = o, stats
        build_graph(cudnn, fg)

        bg = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
        bt = make(bg, sinks_out=True)
        bt["o"] = bg.tensor(name="o", data_type=io, **bhsd(hq, sq, dv))
        bt["do"] = bg.tensor(name="do", data_type=io, **bhsd(hq, sq, dv))
        bt["stats"] = bg.tensor(name="stats", data_type=f32, **stats_dims)
        if p.varlen:
            bt["o"].set_ragged_offset(bt["off_o"])
            bt["do"].set_ragged_offset(bt["off_o"])
            bt["stats"].set_ragged_offset(bt["off_s"])
        ragged_totals = dict(max_total_seq_len_q=p.total_q, max_total_seq_len_kv=p.total_k) if p.varlen else {}
        dq, dk, dvv = bg.sdpa_backward(
            name="sdpa_backward",
            q=bt["q"],
            k=bt["k"],
            v=bt["v"],
            o=bt["o"],
            dO=bt["do"],
            stats=bt["stats"],
            attn_scale=p.scale,
            use_padding_mask=padding,
            seq_len_q=bt.get("seq_q"),
            seq_len_kv=bt.get("seq_k"),
            use_deterministic_algorithm=deterministic,
            sink_token=bt.get("sink"),
            dSink_token=bt.get("dsink"),
            **ragged_totals,
            **mask,
        )
        for grad, (h, s, d), off in (
            (dq, (hq, sq, dqk), "off_q"),
            (dk, (hk, sk, dqk), "off_k"),
            (dvv, (hk, sk, dv), "off_v"),
        ):
            grad.set_output(True).set_data_type(io).set_dim((b, h, s, d)).set_stride(bhsd(h, s, d)["stride"])
            if p.varlen:
                grad.set_ragged_offset(bt[off])
        if p.sinks:
            bt["dsink"].set_output(True)
        bt["dq"], bt["dk"], bt["dv"] = dq, dk, dvv
        build_graph(cudnn, bg)
        self.fwd, self.fwd_t, self.bwd, self.bwd_t = fg, ft, bg, bt
        self.workspace = max(fg.get_workspace_size(), bg.get_workspace_size())


def build_graph(cudnn, g) -> None:
    """Validate a pygraph, pick its plans (heuristics A, then the fallback) and build them:
    raises where the backend declines the configuration."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()


class CudnnGraphAdapter(KernelAdapter, abc.ABC):
    """What the cuDNN adapters share: a forward/backward graph pair built once per configuration
    (``graph_key``, ``make_graphs``) and cached, the build charged to difftest's ``compile`` phase, the refusals
    the capability's fields cannot state raised before any build."""

    def __init__(self):
        self._graphs: dict = {}
        self._handle = None
        self.compile_seconds: list[float] = []  # one entry per configuration built

    def available(self) -> str | None:
        return cuda_reason() or module_reason("cudnn", "pip install nvidia-cudnn-frontend") or sm_reason(9)

    @abc.abstractmethod
    def refusal(self, p: Problem) -> str | None:
        """Why the interface refuses ``p`` although the capability's fields cannot say so, or None."""

    @abc.abstractmethod
    def graph_key(self, p: Problem) -> tuple:
        """What a built graph pair depends on."""

    @abc.abstractmethod
    def make_graphs(self, cudnn, handle, p: Problem):
        """Build the forward and backward graphs of ``p``'s configuration."""

    def _get(self, p: Problem):
        why = self.refusal(p)
        if why:
            raise KernelUnavailable(why)
        cudnn = _cudnn()
        key = self.graph_key(p)
        if key not in self._graphs:
            if self._handle is None:
                self._handle = cudnn.create_handle()
            t0 = time.perf_counter()
            with timing.phase("compile"):
                self._graphs[key] = self.make_graphs(cudnn, self._handle, p)
            self.compile_seconds.append(time.perf_counter() - t0)
        cudnn.set_stream(handle=self._handle, stream=torch.cuda.current_stream().cuda_stream)
        return self._graphs[key]


class CudnnAdapter(CudnnGraphAdapter):
    def __init__(self, deterministic: bool = True):
        super().__init__()
        self.deterministic = deterministic
        self.name = "cudnn" if deterministic else "cudnn-fast"
        self.capability = _capability(deterministic)
        self.description = (
            f"cuDNN fused SDPA fwd/bwd via nvidia-cudnn-frontend graphs, use_deterministic_algorithm={deterministic}"
        )

    def refusal(self, p: Problem) -> str | None:
        return refusal(p)

    def graph_key(self, p: Problem) -> tuple:
        return graph_key(p, self.deterministic)

    def make_graphs(self, cudnn, handle, p: Problem) -> _Graphs:
        return _Graphs(cudnn, handle, p, self.deterministic)

    def _common(self, inputs: Inputs, t: dict) -> dict:
        p = inputs.problem
        dev = inputs.q.device
        pack = {}
        if "seq_q" in t:
            pack[t["seq_q"]] = torch.tensor(p.seqlens_q, dtype=torch.int32, device=dev).view(-1, 1, 1, 1)
            pack[t["seq_k"]] = torch.tensor(p.seqlens_k, dtype=torch.int32, device=dev).view(-1, 1, 1, 1)
        if p.varlen:
            cq = torch.tensor(p.cu_seqlens_q, dtype=torch.int64, device=dev).view(-1, 1, 1, 1)
            ck = torch.tensor(p.cu_seqlens_k, dtype=torch.int64, device=dev).view(-1, 1, 1, 1)
            pack[t["off_q"]] = cq * (p.heads_q * p.head_dim_qk)
            pack[t["off_k"]] = ck * (p.heads_kv * p.head_dim_qk)
            pack[t["off_v"]] = ck * (p.heads_kv * p.head_dim_v)
            pack[t["off_o"]] = cq * (p.heads_q * p.head_dim_v)
            pack[t["off_s"]] = cq * p.heads_q
        if p.sinks:
            pack[t["sink"]] = inputs.sink.detach().float().contiguous().view(1, -1, 1, 1)
        return pack

    @staticmethod
    def _mem(inputs: Inputs, name: str) -> torch.Tensor:
        """The Problem's memory for ``name``: packed [T, H, D] (varlen) or [B, S, H, D]."""
        t = getattr(inputs, name) if inputs.problem.varlen else inputs.bshd(name)
        if not t.is_contiguous():  # the capability declares the contiguous layout only
            raise ValueError(f"cudnn adapter got a non-contiguous {name} {tuple(t.stride())}")
        return t.detach()

    def _run(self, g, pack: dict, workspace: torch.Tensor):
        g.execute(pack, workspace, handle=self._handle)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        gr = self._get(p)
        t = gr.fwd_t
        q, k, v = (self._mem(inputs, n) for n in ("q", "k", "v"))
        o = torch.zeros(*q.shape[:-1], p.head_dim_v, dtype=q.dtype, device=q.device)
        shape = (p.total_q, p.heads_q) if p.varlen else (p.batch, p.heads_q, p.seqlen_q)  # [T, H] / [B, H, S]
        stats = torch.full(shape, float("-inf"), dtype=torch.float32, device=q.device)
        ws = torch.empty(max(gr.workspace, 1), dtype=torch.uint8, device=q.device)
        pack = self._common(inputs, t) | {t["q"]: q, t["k"]: k, t["v"]: v, t["o"]: o, t["stats"]: stats}
        self._run(gr.fwd, pack, ws)
        if p.varlen:
            o_thd, lse_thd = o, stats
        else:
            o_thd = o.reshape(p.batch * p.seqlen_q, p.heads_q, p.head_dim_v)
            lse_thd = lse_bhs_to_thd(stats)  # [B, H, S] -> [B*S, H]
        fwd = Outputs(o=o_thd, lse=normalize_lse(lse_thd, p))
        return fwd, (o, stats)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        o, stats = ctx
        gr = self._get(p)
        t = gr.bwd_t
        q, k, v, do = (self._mem(inputs, n) for n in ("q", "k", "v", "do"))
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dsink = torch.zeros(1, p.heads_q, 1, 1, dtype=torch.float32, device=q.device) if p.sinks else None
        ws = torch.empty(max(gr.workspace, 1), dtype=torch.uint8, device=q.device)
        pack = self._common(inputs, t) | {
            t["q"]: q,
            t["k"]: k,
            t["v"]: v,
            t["o"]: o,
            t["do"]: do,
            t["stats"]: stats,
            t["dq"]: dq,
            t["dk"]: dk,
            t["dv"]: dv,
        }
        if p.sinks:
            pack[t["dsink"]] = dsink
        self._run(gr.bwd, pack, ws)
        if not p.varlen:
            dq, dk, dv = (x.reshape(-1, *x.shape[2:]) for x in (dq, dk, dv))
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink.view(-1) if dsink is not None else None)


def adapter():
    return CudnnAdapter(deterministic=True)


def fast():
    return CudnnAdapter(deterministic=False)
