"""cuDNN's FP8 SDPA forward and backward (``sdpa_fp8``, ``sdpa_fp8_backward``), called
directly through ``nvidia-cudnn-frontend``: the ``cudnn-fp8`` adapter.

The kernel reads the Problem's stored FP8 Q, K, V, dO (``Inputs.fp8``: packed bytes with
power-of-two descales, difftest/model/fp8.py) and writes O, dQ, dK, dV in the same FP8
format with the scales it is given, plus the amax of each before quantisation. Scales the
kernel needs before it runs (O's, dS's -- cuDNN calls it dP --, dQ's, dK's, dV's) come from
a calibration call with unit scales whose amax outputs give ``pow2_scale(amax)`` for the real
call: current scaling, as a training step that measures before it stores, with no value taken
from difftest's references. P is stored with ``scale_s = P_SCALE`` (a power of two, P <= 1).
The returned O, dQ, dK, dV are the stored bytes times their descales (exact); LSE is cuDNN's
float32 Stats. ``amax`` (a dict, set by each call) holds what cuDNN reported.

The contract, as nvidia-cudnn-frontend 1.32.0's headers state it (the wheel's
include/cudnn_frontend/node/sdpa_fp8_bwd.h and sdpa_support_surface.h, read for this
capability); the H200 has cuDNN 9.19, sm90 (Hopper):
- backward, Hopper: d_qk == d_v == 128 ("hidden_dim shoud be equal to 128",
  sdpa_fp8_bwd.h:235); other head dims are Blackwell's (sdpa_fp8_bwd.h:208-232);
- forward, Hopper: d <= 256, a multiple of 16 (sdpa_support_surface.h:262-266): the backward's
  128 decides;
- dtypes: FP8_E4M3 / FP8_E5M2 I/O (the mma core mode, sdpa_support_surface.h:207); HALF/BF16
  outputs only on Blackwell with cuDNN >= 9.13 (sdpa_fp8_bwd.h:346-354,
  sdpa_support_surface.h:277-282): on Hopper dQ, dK, dV and O are FP8;
- ragged (THD) is refused on Hopper (sdpa_fp8_bwd.h:188-190): dense problems only;
- bottom-right causal only on Blackwell (sdpa_fp8_bwd.h:283-286, sdpa_support_surface.h:270-274):
  top-left alignment only (the same for s_q == s_kv);
- GQA/MQA: h_q % h_k == 0 (sdpa_fp8_bwd.h:239); no bias (sdpa_support_surface.h:226);
- cuDNN >= 9.1 and != 9.10.0 (sdpa_fp8_bwd.h:96-106): 9.19 qualifies;
- sliding windows and sinks are not claimed: the headers admit them, but no FP8 test of them
  on Hopper was read, and the H200 has not run them.
- measured on the H200 (2026-12-02, results/fp8.md): every s_q = 1 with s_kv > 1 is declined by
  the backend (cudnnGraphNotSupportedError, 54 of 54 drawn), now a refusal; causal through
  ``use_causal_mask`` (the fp8 ops' spelling: sdpa's ``diagonal_band_right_bound`` raised
  TypeError, an adapter fault), run on the H200 on 2026-12-02 (session 3: O, dQ, dK, dV within
  their budgets on sq = sk = 128 and 256 with GQA 4/2).
- max_seqlen / max_heads / max_batch are campaign bounds (GPU time), not cuDNN's.
"""

from dataclasses import dataclass

import torch

from difftest.model import fp8
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import FP8_DTYPES, Problem

from .cuda_common import lse_bhs_to_thd, normalize_lse
from .cudnn import CudnnGraphAdapter, build_graph

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
    "softmax_scale",
)
HOPPER_HEAD_DIM = 128
GRADS = ("dq", "dk", "dv")


@dataclass(frozen=True)
class CudnnFp8Capability(Capability):
    """The declared capability plus the interface's refusals of field combinations."""

    def excludes(self, p: Problem) -> str | None:
        return super().excludes(p) or refusal(p)


CAPABILITY = CudnnFp8Capability(
    dtypes=FP8_DTYPES,
    head_dims_qk=(HOPPER_HEAD_DIM,),
    head_dims_v=(HOPPER_HEAD_DIM,),
    equal_head_dims=True,
    max_batch=4,
    max_seqlen=2048,
    max_heads=16,
    gqa=True,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=False,
    varlen=False,
    sinks=False,
    outputs=("o", "lse", "dq", "dk", "dv"),
    deterministic=False,
    device="cuda",
    block_m=128,
    block_n=128,
    compile_key=COMPILE_KEY,
)


def refusal(p: Problem) -> str | None:
    """Why cuDNN's FP8 interface refuses ``p`` although the Capability's fields cannot say so."""
    if p.max_seqlen_q == 1 and p.max_seqlen_k == 1:
        return "cuDNN's SDPA backward refuses s_q == s_kv == 1 (as the fp16 one, flash_attention.h:1353)"
    if p.max_seqlen_q == 1:
        return "cuDNN 9.19's FP8 SDPA on Hopper declines s_q == 1 (no engine; measured on the H200, results/fp8.md)"
    if p.causal and p.align != "top_left" and p.seqlen_q != p.seqlen_k:
        return "bottom-right causal FP8 SDPA is Blackwell-only (sdpa_fp8_bwd.h:283-286)"
    return None


def graph_key(p: Problem) -> tuple:
    """What a built graph pair depends on."""
    return (
        p.dtype,
        p.batch,
        p.seqlen_q,
        p.seqlen_k,
        p.heads_q,
        p.heads_kv,
        p.head_dim_qk,
        p.head_dim_v,
        p.causal,
        p.scale,
    )


def scales_from_amax(amax: dict, dtype: str) -> dict:
    """name -> the power-of-two scale an output is stored with, from the amax a calibration
    call reported (current scaling: difftest/model/fp8.py)."""
    return {n: fp8.pow2_scale(float(a), dtype) for n, a in amax.items()}


FWD_SCALARS = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
BWD_SCALARS = (
    "descale_q",
    "descale_k",
    "descale_v",
    "descale_o",
    "descale_dO",
    "descale_s",
    "descale_dP",
    "scale_s",
    "scale_dQ",
    "scale_dK",
    "scale_dV",
    "scale_dP",
)


class _Graphs:
    """The FP8 forward and backward graph of one configuration, with its tensor handles."""

    def __init__(self, cudnn, handle, p: Problem):
        io = {"float8_e4m3fn": cudnn.data_type.FP8_E4M3, "float8_e5m2": cudnn.data_type.FP8_E5M2}[p.dtype]
        f32 = cudnn.data_type.FLOAT
        b, hq, hk, sq, sk, d = p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim_qk
        # sdpa_fp8 and sdpa_fp8_backward take the causal mask as ``use_causal_mask`` (top-left, the only
        # alignment Hopper serves): their bindings raise TypeError on sdpa's diagonal_band_right_bound
        # (cudnn/sdpa/graph_analyzer.py lists each op's spellings; the H200 run: results/fp8.md)
        mask = {"use_causal_mask": True} if p.causal else {}

        def bhsd(h, s):  # [B, H, S, D] dims over BSHD memory
            return dict(dim=(b, h, s, d), stride=(s * h * d, d, h * d, 1))

        def scalar(g, name):
            return g.tensor(name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=f32)

        stats_dims = dict(dim=(b, hq, sq, 1), stride=(hq * sq, sq, 1, 1))
        fg = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
        ft = {
            "q": fg.tensor(name="q", data_type=io, **bhsd(hq, sq)),
            "k": fg.tensor(name="k", data_type=io, **bhsd(hk, sk)),
            "v": fg.tensor(name="v", data_type=io, **bhsd(hk, sk)),
        }
        ft.update({n: scalar(fg, n) for n in FWD_SCALARS})
        o, stats, amax_s, amax_o = fg.sdpa_fp8(
            name="sdpa_fp8",
            q=ft["q"],
            k=ft["k"],
            v=ft["v"],
            **{n: ft[n] for n in FWD_SCALARS},
            generate_stats=True,
            attn_scale=p.scale,
            **mask,
        )
        o.set_output(True).set_data_type(io).set_dim(bhsd(hq, sq)["dim"]).set_stride(bhsd(hq, sq)["stride"])
        stats.set_output(True).set_data_type(f32).set_dim(stats_dims["dim"]).set_stride(stats_dims["stride"])
        for a in (amax_s, amax_o):
            a.set_output(True).set_data_type(f32).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
        ft.update(o=o, stats=stats, amax_s=amax_s, amax_o=amax_o)
        build_graph(cudnn, fg)

        bg = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
        bt = {
            "q": bg.tensor(name="q", data_type=io, **bhsd(hq, sq)),
            "k": bg.tensor(name="k", data_type=io, **bhsd(hk, sk)),
            "v": bg.tensor(name="v", data_type=io, **bhsd(hk, sk)),
            "o": bg.tensor(name="o", data_type=io, **bhsd(hq, sq)),
            "do": bg.tensor(name="do", data_type=io, **bhsd(hq, sq)),
            "stats": bg.tensor(name="stats", data_type=f32, **stats_dims),
        }
        bt.update({n: scalar(bg, n) for n in BWD_SCALARS})
        dq, dk, dv, amax_dq, amax_dk, amax_dv, amax_dp = bg.sdpa_fp8_backward(
            name="sdpa_fp8_backward",
            q=bt["q"],
            k=bt["k"],
            v=bt["v"],
            o=bt["o"],
            dO=bt["do"],
            stats=bt["stats"],
            **{n: bt[n] for n in BWD_SCALARS},
            attn_scale=p.scale,
            **mask,
        )
        for grad, h, s in ((dq, hq, sq), (dk, hk, sk), (dv, hk, sk)):
            grad.set_output(True).set_data_type(io).set_dim(bhsd(h, s)["dim"]).set_stride(bhsd(h, s)["stride"])
        for a in (amax_dq, amax_dk, amax_dv, amax_dp):
            a.set_output(True).set_data_type(f32).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
        bt.update(dq=dq, dk=dk, dv=dv, amax_dq=amax_dq, amax_dk=amax_dk, amax_dv=amax_dv, amax_dp=amax_dp)
        build_graph(cudnn, bg)
        self.fwd, self.fwd_t, self.bwd, self.bwd_t = fg, ft, bg, bt
        self.workspace = max(fg.get_workspace_size(), bg.get_workspace_size())


class CudnnFp8Adapter(CudnnGraphAdapter):
    name = "cudnn-fp8"
    capability = CAPABILITY
    description = (
        "cuDNN FP8 SDPA fwd/bwd (sdpa_fp8, sdpa_fp8_backward) via nvidia-cudnn-frontend graphs, "
        "per-tensor power-of-two current scaling"
    )

    def __init__(self):
        super().__init__()
        self.amax: dict = {}

    def refusal(self, p: Problem) -> str | None:
        return refusal(p)

    def graph_key(self, p: Problem) -> tuple:
        return graph_key(p)

    def make_graphs(self, cudnn, handle, p: Problem) -> _Graphs:
        return _Graphs(cudnn, handle, p)

    @staticmethod
    def _bshd(inputs: Inputs, name: str) -> torch.Tensor:
        """The stored FP8 bytes of ``name`` as [B, S, H, D] (packed memory, contiguous)."""
        p = inputs.problem
        t = inputs.fp8[name].data
        s = p.seqlen_q if name in ("q", "do") else p.seqlen_k
        return t.reshape(p.batch, s, *t.shape[1:])

    @staticmethod
    def _scalars(dev, values: dict) -> dict:
        return {n: torch.tensor([[[[float(v)]]]], dtype=torch.float32, device=dev) for n, v in values.items()}

    def _execute(self, g, t: dict, pack: dict, scalars: dict, ws):
        g.execute({**pack, **{t[n]: x for n, x in scalars.items()}}, ws, handle=self._handle)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        gr, dev = self._get(p), inputs.q.device
        t = gr.fwd_t
        f = fp8.fmt(p.dtype)
        q, k, v = (self._bshd(inputs, n) for n in ("q", "k", "v"))
        o = torch.empty(p.batch, p.seqlen_q, p.heads_q, p.head_dim_v, dtype=f.torch_dtype, device=dev)
        stats = torch.full((p.batch, p.heads_q, p.seqlen_q), float("-inf"), dtype=torch.float32, device=dev)
        amax = {n: torch.full((1, 1, 1, 1), float("nan"), device=dev) for n in ("amax_s", "amax_o")}
        ws = torch.empty(max(gr.workspace, 1), dtype=torch.uint8, device=dev)
        pack = {t["q"]: q, t["k"]: k, t["v"]: v, t["o"]: o, t["stats"]: stats, **{t[n]: a for n, a in amax.items()}}
        fixed = {
            "descale_q": inputs.fp8["q"].descale,
            "descale_k": inputs.fp8["k"].descale,
            "descale_v": inputs.fp8["v"].descale,
            "descale_s": 1.0 / f.p_scale,
            "scale_s": f.p_scale,
        }
        self._execute(gr.fwd, t, pack, self._scalars(dev, {**fixed, "scale_o": 1.0}), ws)  # calibration
        scale_o = fp8.pow2_scale(float(amax["amax_o"]), p.dtype)
        self._execute(gr.fwd, t, pack, self._scalars(dev, {**fixed, "scale_o": scale_o}), ws)
        self.amax = {"s": float(amax["amax_s"]), "o": float(amax["amax_o"])}
        o_deq = fp8.dequantise(o, 1.0 / scale_o).reshape(p.total_q, p.heads_q, p.head_dim_v)
        fwd = Outputs(o=o_deq, lse=normalize_lse(lse_bhs_to_thd(stats), p))
        return fwd, (o, 1.0 / scale_o, stats.view(p.batch, p.heads_q, p.seqlen_q, 1))

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        o, descale_o, stats = ctx
        gr, dev = self._get(p), inputs.q.device
        t = gr.bwd_t
        f = fp8.fmt(p.dtype)
        q, k, v, do = (self._bshd(inputs, n) for n in ("q", "k", "v", "do"))
        grads = {"dq": torch.empty_like(q), "dk": torch.empty_like(k), "dv": torch.empty_like(v)}
        amax = {
            n: torch.full((1, 1, 1, 1), float("nan"), device=dev) for n in ("amax_dq", "amax_dk", "amax_dv", "amax_dp")
        }
        ws = torch.empty(max(gr.workspace, 1), dtype=torch.uint8, device=dev)
        pack = {
            t["q"]: q,
            t["k"]: k,
            t["v"]: v,
            t["o"]: o,
            t["do"]: do,
            t["stats"]: stats,
            **{t[n]: x for n, x in grads.items()},
            **{t[n]: a for n, a in amax.items()},
        }
        fixed = {
            "descale_q": inputs.fp8["q"].descale,
            "descale_k": inputs.fp8["k"].descale,
            "descale_v": inputs.fp8["v"].descale,
            "descale_o": descale_o,
            "descale_dO": inputs.fp8["do"].descale,
            "descale_s": 1.0 / f.p_scale,
            "scale_s": f.p_scale,
        }
        unit = {"scale_dQ": 1.0, "scale_dK": 1.0, "scale_dV": 1.0, "scale_dP": 1.0, "descale_dP": 1.0}
        self._execute(gr.bwd, t, pack, self._scalars(dev, {**fixed, **unit}), ws)  # calibration
        s = scales_from_amax({n: amax[f"amax_{n}"] for n in ("dq", "dk", "dv", "dp")}, p.dtype)
        # (a second calibration with dS's own scale changes no dQ/dK verdict: results/fp8.md, call J)
        real = {
            "scale_dQ": s["dq"],
            "scale_dK": s["dk"],
            "scale_dV": s["dv"],
            "scale_dP": s["dp"],
            "descale_dP": 1.0 / s["dp"],
        }
        self._execute(gr.bwd, t, pack, self._scalars(dev, {**fixed, **real}), ws)
        self.amax.update({n: float(amax[f"amax_{n}"]) for n in ("dq", "dk", "dv", "dp")})
        res = {n: fp8.dequantise(grads[n], 1.0 / s[n]).reshape(-1, *grads[n].shape[2:]) for n in GRADS}
        return Outputs(o=fwd.o, lse=fwd.lse, **res)


def adapter():
    return CudnnFp8Adapter()
