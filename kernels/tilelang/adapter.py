"""Adapters ``tilelang`` (atomic dQ) and ``tilelang-det`` (deterministic dQ) for our
TileLang kernels (source.py). The same adapter runs on the CPU (``target="c"``, CI) and
on a CUDA GPU (``target="cuda"``); it picks the GPU when torch sees one, or the device
named by ``DIFFTEST_TILELANG_DEVICE`` (cpu|cuda).

Everything except dtype, head dims and sinks is runtime data to the kernels, so
``Capability.compile_key`` lists only those: a campaign builds one kernel set per
(dtype, head_dim_qk, head_dim_v, sinks) and reuses it for every shape, mask and scale.
"""

import math
import os

import torch

from difftest.errors import InputError
from difftest.execute.adapter import KernelAdapter, KernelUnavailable
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from . import cache
from .tiles import DQ_MODES, MUTANTS, TILES
from .warm import prebuild

COMPILE_KEY = ("dtype", "head_dim_qk", "head_dim_v", "sinks")
DEVICES = ("cpu", "cuda")

# Every mask and layout feature, both devices: GQA, unequal head dims, causal and windows in
# both alignments, varlen with empty sequences and unused tail tokens, sinks.
FEATURES = dict(
    equal_head_dims=False,
    gqa=True,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=True,
    varlen=True,
    empty_seqs=True,
    pad_tail=True,
    sinks=True,
)


# Memory layouts: contiguous only (the Capability default). Our TileLang kernels are
# compiled for packed [T, H, D] buffers with row-major strides (source.py's T.Tensor
# arguments carry no stride parameters), so the interface takes contiguous tensors alone;
# the adapter's .contiguous() calls only matter for tensors it made itself.
def capability_for(device: str, deterministic: bool, tiles: dict | None = None) -> Capability:
    t = tiles or TILES[device]
    if device == "cpu":
        return Capability(
            dtypes=("float32", "float16"),
            head_dims_qk=(16, 32, 64),
            head_dims_v=(16, 32, 64),
            max_batch=4,
            max_seqlen=256,
            max_heads=8,
            deterministic=True,  # CPU atomics are serial
            device="cpu",
            block_m=t["block_m"],
            block_n=t["block_n"],
            compile_key=COMPILE_KEY,
            **FEATURES,
        )
    return Capability(
        dtypes=("float16", "bfloat16"),
        head_dims_qk=(64, 128, 192),
        head_dims_v=(64, 128),
        max_batch=16,
        max_seqlen=8192,
        max_heads=64,
        deterministic=deterministic,
        device="cuda",
        block_m=t["block_m"],
        block_n=t["block_n"],
        compile_key=COMPILE_KEY,
        **FEATURES,
    )


def default_device() -> str:
    want = os.environ.get("DIFFTEST_TILELANG_DEVICE")
    if want:
        if want not in DEVICES:
            raise InputError(f"DIFFTEST_TILELANG_DEVICE={want!r}: allowed {DEVICES}")
        return want
    return "cuda" if torch.cuda.is_available() else "cpu"


def mask_params(problem, device) -> torch.Tensor:
    """[window_left, window_right, bottom_right] as the kernels read them."""
    from .source import UNBOUNDED  # lazy: source.py imports tilelang, which is optional

    wl = UNBOUNDED if problem.window_left is None else min(problem.window_left, UNBOUNDED)
    wr = UNBOUNDED if problem.window_right is None else min(problem.window_right, UNBOUNDED)
    if problem.causal:
        wr = min(wr, 0)
    br = 1 if problem.align == "bottom_right" else 0
    return torch.tensor([wl, wr, br], dtype=torch.int32, device=device)


def scale_params(problem, device) -> torch.Tensor:
    s = problem.scale
    return torch.tensor([s * math.log2(math.e), s], dtype=torch.float32, device=device)


class TileLangAttention(KernelAdapter):
    """Forward + backward of our TileLang kernels; ``dq_mode`` picks the dQ strategy."""

    def __init__(
        self,
        dq_mode: str = "atomic",
        device: str | None = None,
        mutant: str = "",
        name: str | None = None,
        tiles: dict | None = None,
    ):
        if dq_mode not in DQ_MODES:
            raise InputError(f"dq_mode={dq_mode!r}: allowed {DQ_MODES}")
        if mutant not in MUTANTS:
            raise InputError(f"mutant={mutant!r}: allowed {MUTANTS}")
        self.dq_mode = dq_mode
        self.device = device or default_device()
        if self.device not in DEVICES:
            raise InputError(f"device={self.device!r}: allowed {DEVICES}")
        self.target = "c" if self.device == "cpu" else "cuda"
        self.mutant = mutant
        self.tiles = {**TILES[self.device], **(tiles or {})}  # tiles: the variants' other block sizes
        self.name = name or ("tilelang" if dq_mode == "atomic" else "tilelang-det")
        self.capability = capability_for(self.device, deterministic=dq_mode == "deterministic", tiles=self.tiles)
        self.stage_events = None  # bench.py sets a list: backward then records (stage, cuda event)
        self.description = (
            f"our TileLang flash attention ({self.target}), dQ {dq_mode}, "
            f"tiles {self.tiles['block_m']}x{self.tiles['block_n']}" + (f", MUTANT {mutant}" if mutant else "")
        )

    # ------------------------------------------------------------------ availability
    def available(self) -> str | None:
        try:
            # lazy: tilelang is optional (the 'tilelang' extra); the adapter loads and says so without it
            import tilelang  # noqa: F401
        except Exception as e:  # ImportError or a broken native library
            return f"tilelang not importable: {e}"
        if self.device == "cuda" and not torch.cuda.is_available():
            return "no CUDA device visible to torch"
        return None

    def _kernel(self, kind: str, **params):
        why = self.available()
        if why:
            raise KernelUnavailable(why)
        return cache.get_kernel(kind, self.target, **params)

    def kernel_params(self, kind: str, p) -> dict:
        """The build parameters of kernel ``kind`` for Problem ``p`` (one table, read by
        forward/backward and by ``prepare``, so a prebuild builds exactly what a call asks for)."""
        t = self.tiles
        if kind == "fwd":
            return dict(
                dtype=p.dtype,
                dim_qk=p.head_dim_qk,
                dim_v=p.head_dim_v,
                sinks=p.sinks,
                block_m=t["block_m"],
                block_n=t["block_n"],
                threads=t["fwd_threads"],
                stages=t["stages"],
            )
        if kind == "pre":
            return dict(dtype=p.dtype, dim_v=p.head_dim_v, sinks=p.sinks, block_m=t["block_m"], mutant=self._m("pre"))
        if kind == "main":
            return dict(
                dtype=p.dtype,
                dim_qk=p.head_dim_qk,
                dim_v=p.head_dim_v,
                block_m=t["block_m"],
                block_n=t["block_n"],
                dq_mode=self.dq_mode,
                threads=t["bwd_threads"],
                stages=t["stages"],
                mutant=self._m("main"),
            )
        if kind == "post_det":
            return dict(dtype=p.dtype, dim_qk=p.head_dim_qk, block_m=t["block_m"], block_n=t["block_n"])
        if kind == "post":
            return dict(dtype=p.dtype, dim_qk=p.head_dim_qk)
        if kind == "dsink":
            return {}
        raise InputError(f"kind={kind!r}: allowed fwd, pre, main, post, post_det, dsink")

    def kernel_set(self, p) -> list[tuple[str, dict]]:
        """Every (kind, params) a forward + backward of ``p`` may build."""
        kinds = ["fwd", "pre", "main", "post_det" if self.dq_mode == "deterministic" else "post"]
        return [(k, self.kernel_params(k, p)) for k in kinds + (["dsink"] if p.sinks else [])]

    def prepare(self, problems, jobs: int | None = None, log=None, wait: bool = True):
        """Build, in parallel, every kernel ``problems`` need that TileLang's disk cache does
        not hold yet (warm.prebuild), so the campaign's own builds become cache loads.
        ``wait=False``: start the builds and return the job (``.wait()`` -> counts)."""
        requests = {}
        if not self.available():
            for p in problems:
                for kind, params in self.kernel_set(p):
                    requests[cache.cache_key(kind, self.target, **params)] = (kind, params)
        return prebuild(self.target, list(requests.values()), jobs=jobs, log=log, wait=wait)

    def compile_stats(self) -> dict:
        """Builds and in-process cache hits so far (all our TileLang kernels of this process)."""
        return cache.stats().as_dict()

    # ------------------------------------------------------------------ forward
    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        dev = self.device
        x = inputs if inputs.q.device.type == dev else inputs.to(dev)
        q, k, v = x.q.contiguous(), x.k.contiguous(), x.v.contiguous()
        dt = q.dtype
        o = torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=dt, device=dev)
        lse = torch.full((p.total_q, p.heads_q), float("-inf"), dtype=torch.float32, device=dev)
        sink = x.sink if x.sink is not None else torch.zeros(p.heads_q, dtype=torch.float32, device=dev)
        mp, sc = mask_params(p, dev), scale_params(p, dev)
        cuq, cuk = x.cu_seqlens_q.to(torch.int32), x.cu_seqlens_k.to(torch.int32)
        if p.max_seqlen_q > 0:
            fwd = self._kernel("fwd", **self.kernel_params("fwd", p))
            fwd(q, k, v, cuq, cuk, mp, sc, sink.contiguous(), p.max_seqlen_q, o, lse)
        ctx = dict(x=x, mp=mp, sc=sc, sink=sink, cuq=cuq, cuk=cuk)
        return Outputs(o=o, lse=lse), ctx

    # ------------------------------------------------------------------ backward
    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        dev = self.device
        x = ctx["x"]
        t = self.tiles
        q, k, v, do = (a.contiguous() for a in (x.q, x.k, x.v, x.do))
        o, lse = fwd.o.contiguous(), fwd.lse.contiguous()
        dq = torch.zeros_like(q)
        dk = torch.zeros_like(k)
        dv = torch.zeros_like(v)
        dsink = torch.zeros(p.heads_q, dtype=torch.float32, device=dev) if p.sinks else None
        if p.max_seqlen_q == 0:
            return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
        delta = torch.zeros(p.total_q, p.heads_q, dtype=torch.float32, device=dev)
        dsr = torch.zeros_like(delta)
        pre = self._kernel("pre", **self.kernel_params("pre", p))
        self._mark("start")
        pre(o, do, lse, ctx["sink"], ctx["cuq"], p.max_seqlen_q, delta, dsr)
        if p.sinks:
            self._kernel("dsink")(dsr, dsink)
        self._mark("pre")
        if p.max_seqlen_k > 0:
            nkb = -(-p.max_seqlen_k // t["block_n"])
            det = self.dq_mode == "deterministic"
            if det:  # every partial the reduction reads is written by the main kernel
                dqa = torch.empty(nkb, p.total_q, p.heads_q, p.head_dim_qk, dtype=torch.float32, device=dev)
                if dev == "cpu":  # NaN, so a partial read but never written shows in CI
                    dqa.fill_(float("nan"))
            else:
                dqa = torch.zeros(p.total_q, p.heads_q, p.head_dim_qk, dtype=torch.float32, device=dev)
            main = self._kernel("main", **self.kernel_params("main", p))
            main(q, k, v, do, lse, delta, ctx["cuq"], ctx["cuk"], ctx["mp"], ctx["sc"], p.max_seqlen_k, dqa, dk, dv)
            self._mark("main")
            if det:
                post = self._kernel("post_det", **self.kernel_params("post_det", p))
                post(dqa, ctx["sc"], ctx["cuq"], ctx["cuk"], ctx["mp"], p.max_seqlen_q, dq)
            else:
                post = self._kernel("post", **self.kernel_params("post", p))
                post(dqa, ctx["sc"], dq)
            self._mark("post")
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)

    def _mark(self, stage: str) -> None:
        if self.stage_events is not None and self.device == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.stage_events.append((stage, ev))

    def _m(self, kind: str) -> str:
        """The mutant's name for the kernel it lives in, else ''."""
        where = {"dsink_sign": "pre"}.get(self.mutant, "main")
        return self.mutant if self.mutant and where == kind else ""


def atomic() -> TileLangAttention:
    return TileLangAttention("atomic")


def deterministic() -> TileLangAttention:
    return TileLangAttention("deterministic")
