"""TileOPs attention backward ops, run in a separate Python process.

TileOPs 0.1.0 pins tilelang 0.1.12 while our own kernels use tilelang 0.1.15, and one
process can import only one. So the adapter starts a worker (``python -m difftest.kernels.tileops
--serve``) whose ``PYTHONPATH`` holds the TileOPs site folder first
(``$DIFFTEST_TILEOPS_SITE``, default ``$XDG_CACHE_HOME/difftest/tileops_site``, i.e.
``~/.cache/difftest/tileops_site``) and never our tilelang. The site folder's code runs in
the worker, so it must be the user's own: owned by this user and writable by no one else
(``safeio.check_private_dir``), else the adapter is unavailable and says why; the old
default, ``/tmp/tileops_site``, was a world-writable place where another user could plant a
``torch.py``. Requests
and replies are pickled dicts of CPU tensors over the worker's stdin and a private copy of
its original stdout; the worker's own prints (tilelang's logs) go to stderr.

Adapters:
- ``tileops-gqa``: ``GQADenseWithLSEFwdOp`` forward and ``GQADenseBwdOp`` backward, BSHD,
  S_q == S_kv, causal or not, GQA; no window, sinks, varlen (the backward op refuses them).
- ``tileops-mha``: the same two ops on MHA calls (heads_kv == heads_q). TileOPs 0.1.0 has
  no separate dense MHA backward op: ``GQADenseBwdOp`` serves MHA (its SM90 kernels'
  docstrings: "causal or full GQA/MHA backward"); this adapter campaigns that half alone.
- ``tileops-gqa-bwd``: ``GQADenseBwdOp`` alone at every head dim its SM90 backward serves.
  Its O and LSE come from our float32 reference (O rounded to the Problem dtype, LSE
  float32 natural log, what the op documents), because TileOPs' LSE-returning forward
  serves d128 only on SM90; only dq, dk, dv are checked.
- ``tileops-mla``: ``MLADenseBwdOp`` (MLA prefill backward after decompression: per-head
  keys, D_qk != D_v, bottom-right causal). TileOPs has no matching dense forward for
  arbitrary S_q != S_kv, so ``o`` and ``lse`` handed to it come from our float32 reference
  (rounded to the Problem dtype) and only dq, dk, dv are checked.

Every new shape is a TileLang build (``COMPILE_KEY``), ~10-40 s on the H200, one at a time in
a campaign. ``python -m difftest.kernels.tileops --warm OP --jobs N`` builds the edge corpus's
compile configurations first, N workers at once, into TileLang's disk cache
(``TILELANG_CACHE_DIR``: give the campaign the same one). ``difftest run`` does the same for
a campaign's saved failures and edge corpus through ``TileOpsAdapter.prepare`` (difftest.run.prebuild).

A build is charged to difftest's "compile" phase, not to the kernel (difftest/execute/isolation.py
bounds it by ``compile_timeout_s``, so a slow build on a loaded host is not a "hang"). The
build happens lazily inside the op's first call of a shape, but TileLang separates it:
``JITImpl.compile`` (tilelang 0.1.12, tilelang/jit/__init__.py: lowering, the build or a
disk-cache load, returning a ``JITKernel``) builds, the ``JITKernel``'s ``__call__`` runs
(where the seq_len-64 backward hangs: results/bugs/tileops/REPORT-bwd-hang-seqlen64.md). So
the worker wraps ``JITImpl.compile`` and the module-level ``compile`` (``report_builds``) and
sends ``{"building": True}`` / ``{"building": False}`` around each outermost build before the
reply; ``Worker.call`` turns them into ``timing.phase("compile")``. We did not mark the whole
first call of a new compile signature as compile: that would turn the seq_len-64 hang into a
build timeout. A TileLang without these names sends nothing (``Worker.reports_builds`` is
False) and builds count as kernel time, as before.
"""

import argparse
import contextlib
import ctypes
import functools
import importlib
import io
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import torch

from difftest.errors import InputError
from difftest.execute import timing
from difftest.execute.adapter import KernelAdapter, KernelUnavailable
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs, make_inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference
from difftest.safeio import check_private_dir
from difftest.strategies import edge_problems

from .cuda_common import cuda_reason, lse_bhs_to_thd, normalize_lse, thd

SITE_ENV = "DIFFTEST_TILEOPS_SITE"


def default_site() -> str:
    """``$XDG_CACHE_HOME/difftest/tileops_site`` (``~/.cache/difftest/tileops_site``): the
    user's own cache, never a shared folder (``pip install --target`` TileOPs there)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "difftest", "tileops_site")


def site_folder() -> str:
    """The TileOPs site folder: ``$DIFFTEST_TILEOPS_SITE``, else ``default_site()``."""
    return os.environ.get(SITE_ENV) or default_site()


def site_unsafe(site: str) -> str | None:
    """Why ``site`` must not be put first on the worker's PYTHONPATH, or None: it (and its
    ``tileops`` package, when there) must be owned by this user and writable by no one else."""
    for folder in (site, os.path.join(site, "tileops")):
        if folder != site and not os.path.lexists(folder):
            continue
        why = check_private_dir(folder)
        if why:
            return f"TileOPs site folder refused: {why} (its code would run in the worker; set ${SITE_ENV})"
    return None


def site_problem(site: str) -> str | None:
    """Why the adapter cannot use ``site``, or None: its ``tileops`` package missing, or ``site_unsafe``."""
    if not Path(site, "tileops").is_dir():
        return f"TileOPs site folder {site}/tileops missing (set ${SITE_ENV})"
    return site_unsafe(site)


REPO_ROOT = str(Path(__file__).resolve().parents[1])

# What makes TileOPs compile again: its kernels take every shape as a compile-time constant
# (tileops 0.1.0 GQABwdPreprocessKernel.entry_for: batch, heads, seq_len, dim, dtype, sm_scale;
# GQABwdWGMMAPipelinedKernel.entry_for adds heads_kv and is_causal; each new tuple is a new
# TileLang build, ~10-40 s on the H200). The compile-aware strategy (strategies/compile.py)
# then draws most problems in shapes the campaign (and ``--warm``) already built; declaring
# only dtype/dims/heads had let every drawn batch, length or scale be a new build (P2: 7.6 s
# per case). The softmax scale enters as a constant too (``scale = sm_scale * LOG2E``).
COMPILE_KEY = ("dtype", "head_dim_qk", "causal", "heads_q", "heads_kv", "batch", "seqlen_q", "softmax_scale")

# The contract, as tileops 0.1.0's own code states it (paths under tileops/ of the wheel; read
# for this capability, not inferred from runs). An op serves a call when any of its kernels'
# refusal() returns None (_ops/op_base.py:688-695), so the union of the kernels counts.
# - forward, GQADenseWithLSEFwdOp: "on SM90 for prefill (S_q > 1) without a window"
#   (_ops/attention/gqa/dense.py:263-264). GQADensePersistentWSKernel returns the LSE at head dim
#   128 only (_kernels/attention/gqa/dense.py:2204), but GQADenseWSKernel serves any S_q > 1
#   without window or sinks-with-LSE at every head dim its tensor cores step through, a multiple
#   of 16 (dense.py:785-789, _kernels/attention/call_spec.py:151-154). The H200 matched this:
#   d64 ran at S=128 and was refused only at S=1. So every multiple of 16, min_seqlen 2 (S=1,
#   dense.py:785: an H200 campaign died on b1 sq1 sk1 d128).
# - backward, GQADenseBwdOp: a square call, S_q == S_kv (its docstring, _ops/attention/gqa/bwd.py:28,
#   and _attention_call takes one seq_len, bwd.py:84-101: an evidenced exclusion of
#   seqlen_q != seqlen_k); no window, no softcap (bwd.py:32-35); fp16/bf16 (bwd.py:117-119);
#   GQABwdWGMMAPipelinedKernel serves any head dim that is a multiple of 16 (_kernels/attention/
#   gqa/bwd.py:580-581) and fits shared memory at its narrowest default, 64x64x1 stage
#   (bwd.py:566-571, 582-591; bytes 768*d + 8704, bwd.py:615-622): d <= 291 in the H200's
#   227 KiB, so multiples of 16 up to 288 (GQABwdWSKernel, d128 with S % 128 == 0, is one more
#   server, bwd_ws.py).
# - both ops therefore: multiples of 16 in 16..288, what the pair accepts (a late refusal or
#   build failure inside it is a contract violation for the campaign to report). Every new head
#   dim is another TileLang build (COMPILE_KEY).
# - Measured on the H200 (results/bugs/tileops/repro_tileops_head_dims.py, without
#   difftest): the forward's GQADenseWSKernel cannot launch at head dims 160..288 (it asks for
#   1536 x D bytes of shared memory, the refusal check does not bound it): a contract violation,
#   results/bugs/tileops/REPORT-fwd-head-dim-smem.md. The backward serves all of 16..288. The
#   capability keeps stating the interface; campaigns step around the finding with
#   `--narrow head_dims_qk=16,32,48,64,80,96,112,128,144` (tileops-gqa-bwd, whose O/LSE come from
#   the reference, needs no narrowing).
# Memory layouts: contiguous only (the Capability default) for both adapters. Tensors cross
# into the TileOPs worker process pickled as contiguous CPU copies (``_cpu``), so no layout
# could reach the kernel, and TileOPs' ops are TileLang kernels over contiguous BSHD buffers.
_DIMS16 = tuple(range(16, 289, 16))
GQA_CAPABILITY = Capability(
    dtypes=("float16", "bfloat16"),
    head_dims_qk=_DIMS16,
    equal_head_dims=True,
    max_batch=8,
    max_seqlen=4096,
    min_seqlen_q=2,
    min_seqlen_k=2,
    max_heads=32,
    gqa=True,
    seqlen_q_ne_k=False,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    sinks=False,
    softmax_scale=True,
    outputs=("o", "lse", "dq", "dk", "dv"),
    deterministic=False,
    device="cuda",
    block_m=64,
    block_n=64,
    compile_key=COMPILE_KEY,
)

# The backward op alone: the backward half of the contract above; its O and LSE come from our
# float32 reference, so the forward's S_q > 1 does not bind it.
GQA_BWD_CAPABILITY = Capability(
    dtypes=("float16", "bfloat16"),
    head_dims_qk=_DIMS16,
    equal_head_dims=True,
    max_batch=8,
    max_seqlen=4096,
    max_heads=32,
    gqa=True,
    seqlen_q_ne_k=False,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    sinks=False,
    softmax_scale=True,
    outputs=("dq", "dk", "dv"),
    deterministic=False,
    device="cuda",
    block_m=64,
    block_n=64,
    compile_key=COMPILE_KEY,
)

# MHA calls of the GQA ops (the same contract, heads_kv == heads_q).
MHA_CAPABILITY = replace(GQA_CAPABILITY, gqa=False)

MLA_CAPABILITY = Capability(
    dtypes=("float16", "bfloat16"),
    head_dims_qk=(192,),
    head_dims_v=(128,),
    equal_head_dims=False,
    max_batch=4,
    max_seqlen=4096,
    max_heads=32,
    gqa=False,
    seqlen_q_ne_k=True,
    causal=True,
    aligns=("bottom_right",),
    window=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    sinks=False,
    outputs=("dq", "dk", "dv"),
    deterministic=False,
    device="cuda",
    block_m=64,
    block_n=64,
    compile_key=("dtype", "causal", "batch", "heads_q", "seqlen_q", "seqlen_k", "softmax_scale"),
)


# ---------------------------------------------------------------- wire format
def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def recv(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("TileOPs worker closed its pipe")
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(n))


def worker_env(site: str) -> dict:
    """The worker's environment: TileOPs' site first, our repo for this module, nothing of
    the parent's PYTHONPATH (which may hold tilelang 0.1.15)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([site, REPO_ROOT])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONSAFEPATH"] = "1"  # the cwd is never put on its sys.path (a planted module there)
    env.pop(PARENT_ENV, None)
    if threading.current_thread() is threading.main_thread():  # see die_with_parent
        env[PARENT_ENV] = str(os.getpid())
    return env


PARENT_ENV = "DIFFTEST_TILEOPS_PARENT"


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this TileOPs worker when the process that started it
    (pid ``$DIFFTEST_TILEOPS_PARENT``) dies. The isolation worker running the adapter is
    SIGKILLed on a timeout and cannot close its TileOPs worker, which would go on building for
    nobody on a loaded host, or, stuck on the GPU (the seq_len-64 backward), hold the device
    for the rest of the campaign. Only for a worker started from a main thread: the signal
    follows the starting *thread*, and a thread's end must not kill a shared worker."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # it died before the prctl
        os._exit(1)


class Worker:
    """One long-lived TileOPs process; requests are serialised by a lock. Its site folder is
    checked first (``site_problem``: the user's own, writable by no one else)."""

    def __init__(self, site: str):
        why = site_unsafe(site)  # a missing package is the worker's own report (its hello)
        if why:
            raise KernelUnavailable(why)
        self.site = site
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "difftest.kernels.tileops", "--serve"],
            cwd=REPO_ROOT,
            env=worker_env(site),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
        )
        hello = recv(self.proc.stdout)
        if not hello.get("ok"):
            self.close()
            raise KernelUnavailable(f"TileOPs worker could not start: {hello.get('error')}")
        self.versions = hello.get("versions", {})
        self.reports_builds = bool(hello.get("reports_builds"))  # sends {"building": ...} (report_builds)

    def call(self, req: dict) -> dict:
        with self.lock:
            if self.proc.poll() is not None:
                raise RuntimeError(f"TileOPs worker exited with code {self.proc.returncode}")
            send(self.proc.stdin, req)
            rep = read_reply(self.proc.stdout)
        if "error" in rep:
            e = RuntimeError(f"TileOPs: {rep['error']}")
            e.error_type = rep.get("error_type", "RuntimeError")  # the worker's exception (runner.error_type)
            raise e
        return rep

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def read_reply(stream) -> dict:
    """The reply to one request; the worker's build notices before it (``{"building": bool}``)
    enter and leave ``timing.phase("compile")``, on the main thread only: difftest's timer is
    one per process and not thread-safe, and ``warm`` calls from threads of its own."""
    charge = threading.current_thread() is threading.main_thread()
    with contextlib.ExitStack() as building:
        while True:
            rep = recv(stream)
            if set(rep) != {"building"}:
                return rep
            if not charge:
                continue
            if rep["building"]:
                building.enter_context(timing.phase("compile"))
            else:
                building.close()


_WORKERS: dict[str, Worker] = {}
_LOCAL = threading.local()  # a thread's own worker (``warm`` runs one per thread)


def get_worker() -> Worker:
    own = getattr(_LOCAL, "worker", None)
    if own is not None:
        return own
    site = site_folder()
    if site not in _WORKERS:
        # its interpreter start (torch, TileLang, TileOPs imports) is set-up, not the kernel:
        # outside the case's timeout_s (timing.UNTIMED), like a build
        main = threading.current_thread() is threading.main_thread()
        with timing.phase("worker_start") if main else contextlib.nullcontext():
            _WORKERS[site] = Worker(site)
    return _WORKERS[site]


def _cpu(t):
    return None if t is None else t.detach().contiguous().cpu()


OPS = {  # adapter op -> (capability, worker op family, TileOPs forward used?)
    "gqa": (GQA_CAPABILITY, "gqa", True),
    "mha": (MHA_CAPABILITY, "gqa", True),
    "gqa-bwd": (GQA_BWD_CAPABILITY, "gqa", False),
    "mla": (MLA_CAPABILITY, "mla", False),
}


class TileOpsAdapter(KernelAdapter):
    def __init__(self, op: str):
        if op not in OPS:
            raise InputError(f"op={op!r}: allowed {sorted(OPS)}")
        self.op = op
        self.name = f"tileops-{op}"
        self.capability, self.wire, self.own_forward = OPS[op]
        op_class = "GQADenseBwdOp" if self.wire == "gqa" else "MLADenseBwdOp"
        ref = "" if self.own_forward else ", O/LSE from the reference"
        self.description = f"TileOPs 0.1.0 {op_class} (subprocess, tilelang 0.1.12{ref})"

    def available(self) -> str | None:
        r = cuda_reason()
        if r:
            return r
        return site_problem(site_folder())

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        if self.own_forward:
            rep = get_worker().call(
                {
                    "op": "gqa_fwd",
                    "causal": p.causal,
                    "scale": p.scale,
                    "q": _cpu(inputs.bshd("q")),
                    "k": _cpu(inputs.bshd("k")),
                    "v": _cpu(inputs.bshd("v")),
                }
            )
            o = rep["o"].to(inputs.device)  # [B, S, H, D]
            lse = rep["lse"].to(inputs.device)  # [B, H, S]
            fwd = Outputs(o=thd(o), lse=normalize_lse(lse_bhs_to_thd(lse), p))
            return fwd, (o, lse)
        ref = reference(inputs, "float32")
        o = ref.o.to(inputs.q.dtype).view(p.batch, p.seqlen_q, p.heads_q, p.head_dim_v)
        lse = ref.lse.view(p.batch, p.seqlen_q, p.heads_q).permute(0, 2, 1).contiguous()
        return Outputs(), (o, lse)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        o, lse = ctx
        rep = get_worker().call(
            {
                "op": f"{self.wire}_bwd",
                "causal": p.causal,
                "scale": p.scale,
                "q": _cpu(inputs.bshd("q")),
                "k": _cpu(inputs.bshd("k")),
                "v": _cpu(inputs.bshd("v")),
                "do": _cpu(inputs.bshd("do")),
                "o": _cpu(o),
                "lse": _cpu(lse),
            }
        )
        dq, dk, dv = (thd(rep[n].to(inputs.device)) for n in ("dq", "dk", "dv"))
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv)

    def prepare(self, problems, jobs: int | None = None, log=None, wait: bool = True):
        """Build the compile configurations of ``problems`` (a campaign's saved failures and
        edge corpus: difftest.run.prebuild) on ``jobs`` TileOPs workers at once (default: all cores
        but two). ``wait=False`` returns the job under way (its ``wait()`` gives counts)."""
        todo = distinct_configs(self.capability, problems)
        job = WarmJob(self, todo, jobs or max(1, (os.cpu_count() or 2) - 2), log)
        return job.wait() if wait else job

    def bench_backward(self, inputs: Inputs, ctx, repeats: int = 20, warmup: int = 3) -> list[float]:
        """Backward times in microseconds measured inside the worker with CUDA events."""
        p = inputs.problem
        o, lse = ctx
        rep = get_worker().call(
            {
                "op": f"{self.wire}_bench",
                "causal": p.causal,
                "scale": p.scale,
                "repeats": repeats,
                "warmup": warmup,
                "q": _cpu(inputs.bshd("q")),
                "k": _cpu(inputs.bshd("k")),
                "v": _cpu(inputs.bshd("v")),
                "do": _cpu(inputs.bshd("do")),
                "o": _cpu(o),
                "lse": _cpu(lse),
            }
        )
        return rep["times_us"]


def gqa():
    return TileOpsAdapter("gqa")


def mla():
    return TileOpsAdapter("mla")


def mha():
    return TileOpsAdapter("mha")


def gqa_bwd():
    return TileOpsAdapter("gqa-bwd")


# ---------------------------------------------------------------- worker side
def report_builds(proto, jit) -> bool:
    """Make TileLang's builds announce themselves on ``proto``: wrap ``jit.JITImpl.compile``
    and ``jit.compile`` (``jit``: the ``tilelang.jit`` module) so the outermost build of a call
    sends ``{"building": True}`` before and ``{"building": False}`` after (see the module
    docstring). False, changing nothing, when this TileLang lacks either name."""
    impl = getattr(jit, "JITImpl", None)
    if impl is None or not callable(getattr(impl, "compile", None)) or not callable(getattr(jit, "compile", None)):
        return False
    depth = [0]

    def announcing(build):
        @functools.wraps(build)
        def wrapper(*args, **kwargs):
            depth[0] += 1
            if depth[0] == 1:
                send(proto, {"building": True})
            try:
                return build(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    send(proto, {"building": False})

        return wrapper

    impl.compile = announcing(impl.compile)
    jit.compile = announcing(jit.compile)
    return True


def _serve() -> None:  # pragma: no cover - runs in the TileOPs process on a GPU machine
    die_with_parent()
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed from here on (tilelang logs) goes to stderr
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
    stdin = sys.stdin.buffer
    try:
        # lazy: TileOPs and its own tilelang (0.1.12, not ours) exist only on this worker's PYTHONPATH
        import tilelang
        import tileops
        from tileops.attention import GQADenseBwdOp, GQADenseWithLSEFwdOp, MLADenseBwdOp
    except Exception as e:  # noqa: BLE001
        send(proto, {"ok": False, "error": f"{type(e).__name__}: {e}"})
        return
    jit = importlib.import_module("tilelang.jit")  # the module (``tilelang.jit`` is also its decorator)
    public = getattr(tilelang, "compile", None) is getattr(jit, "compile", None)
    reports = report_builds(proto, jit)
    if reports and public:
        tilelang.compile = jit.compile  # the same wrapper under its public name
    send(
        proto,
        {
            "ok": True,
            "reports_builds": reports,
            "versions": {
                "tileops": getattr(tileops, "__version__", "?"),
                "tilelang": getattr(tilelang, "__version__", "?"),
                "torch": torch.__version__,
            },
        },
    )
    ops: dict = {}

    def op(kind, causal, scale):
        key = (kind, causal, scale)
        if key not in ops:
            cls = {"gqa_fwd": GQADenseWithLSEFwdOp, "gqa_bwd": GQADenseBwdOp, "mla_bwd": MLADenseBwdOp}[kind]
            ops[key] = cls(is_causal=causal, sm_scale=scale)
        return ops[key]

    while True:
        try:
            req = recv(stdin)
        except EOFError:
            return
        try:
            g = {n: (t.cuda() if isinstance(t, torch.Tensor) else t) for n, t in req.items()}
            kind = req["op"]
            if kind == "gqa_fwd":
                o, lse = op("gqa_fwd", g["causal"], g["scale"]).forward(g["q"], g["k"], g["v"])
                rep = {"o": o.cpu(), "lse": lse.float().cpu()}
            elif kind in ("gqa_bwd", "mla_bwd"):
                dq, dk, dv = op(kind, g["causal"], g["scale"]).forward(
                    g["do"], g["q"], g["k"], g["v"], g["o"].contiguous(), g["lse"].contiguous()
                )
                torch.cuda.synchronize()
                rep = {"dq": dq.cpu(), "dk": dk.cpu(), "dv": dv.cpu()}
            elif kind in ("gqa_bench", "mla_bench"):
                f = op(kind.replace("bench", "bwd"), g["causal"], g["scale"])
                args = (g["do"], g["q"], g["k"], g["v"], g["o"].contiguous(), g["lse"].contiguous())
                for _ in range(req["warmup"]):
                    f.forward(*args)
                times = []
                for _ in range(req["repeats"]):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    f.forward(*args)
                    b.record()
                    b.synchronize()
                    times.append(a.elapsed_time(b) * 1000.0)
                rep = {"times_us": times}
            else:
                rep = {"error": f"unknown request op {kind!r}"}
        except Exception as e:  # noqa: BLE001
            rep = {"error": f"{type(e).__name__}: {e}", "error_type": type(e).__name__}
        send(proto, rep)


# ---------------------------------------------------------------- warming the disk cache
def distinct_configs(capability: Capability, problems) -> list[Problem]:
    """The first Problem of each compile configuration (``COMPILE_KEY``) among ``problems``,
    in their order, leaving out those ``capability`` does not cover."""
    out, seen = [], set()
    for p in problems:
        sig = capability.compile_signature(p)
        if sig not in seen and capability.excludes(p) is None:
            seen.add(sig)
            out.append(p)
    return out


def warm_problems(op: str, profile: str = "gpu", extra=()) -> list[Problem]:
    """One Problem per compile configuration of the edge corpus a campaign of ``op`` runs
    first, in its order, then of ``extra`` (those the op covers)."""
    if op not in OPS:
        raise InputError(f"op={op!r}: allowed {sorted(OPS)}")
    cap = OPS[op][0]
    return distinct_configs(cap, [*edge_problems(cap, profile), *extra])


class WarmJob:
    """Runs ``adapter`` once on each of ``todo`` through ``jobs`` TileOPs workers at once (one
    thread each), so every TileLang build lands in its disk cache (``TILELANG_CACHE_DIR``,
    shared by the campaign's worker) and a campaign's serial builds become loads. A shape
    that does not build is one line in ``errors``; the rest still build."""

    def __init__(self, adapter: "TileOpsAdapter", todo: list[Problem], jobs: int, log=None):
        self.adapter, self.todo, self.log = adapter, todo, log or (lambda m: None)
        self.errors: list[str] = []
        self.built = 0
        self.lock = threading.Lock()
        self.t0 = time.perf_counter()
        self.jobs = max(1, min(jobs, len(todo))) if todo else 0
        self.queue = iter(todo)  # shared: a free worker takes the next shape, in the corpus's order
        self.threads = [threading.Thread(target=self._lane, daemon=True) for _ in range(self.jobs)]
        for t in self.threads:
            t.start()

    def _next(self):
        with self.lock:
            return next(self.queue, None)

    def _lane(self):
        site = site_folder()
        try:
            _LOCAL.worker = Worker(site)
        except Exception as e:  # noqa: BLE001
            with self.lock:  # no shape is lost: another worker may still take them
                self.errors.append(f"a worker did not start: {type(e).__name__}: {e}")
            return
        try:
            while (p := self._next()) is not None:
                t0 = time.perf_counter()
                try:
                    self.adapter.run(make_inputs(p))
                    msg = f"warm {self.adapter.name} {p.short()} {time.perf_counter() - t0:.1f} s"
                    with self.lock:
                        self.built += 1
                except Exception as e:  # noqa: BLE001
                    msg = f"{p.short()}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                    with self.lock:
                        self.errors.append(msg)
                self.log(msg)
        finally:
            _LOCAL.worker.close()
            _LOCAL.worker = None

    def wait(self) -> dict:
        """Join the workers; counts as ``difftest.run.prebuild`` reports them."""
        for t in self.threads:
            t.join()
        left = sum(1 for _ in self.queue)  # only when no worker started
        if left:
            self.errors.append(f"{left} shapes not built: no TileOPs worker started")
        n = len(self.todo)
        failed = n - self.built
        return {
            "requested": n,
            "cached": 0,
            "built": self.built,
            "failed": failed,
            "seconds": round(time.perf_counter() - self.t0, 2),
            "jobs": self.jobs,
        }


def warm(op: str, jobs: int = 8, profile: str = "gpu", extra=(), log=print) -> list[str]:
    """Build ``warm_problems(op, profile, extra)`` on ``jobs`` workers; returns the errors."""
    job = WarmJob(TileOpsAdapter(op), warm_problems(op, profile, extra), jobs, log)
    job.wait()
    return job.errors


def parse_warm_args(argv):
    """``--warm OP [--jobs N] [--profile P] [--problem JSON ...]``; bad input exits 2 with one line."""
    ap = argparse.ArgumentParser(
        prog="python -m difftest.kernels.tileops", description="build a TileOPs op's edge-corpus shapes in parallel"
    )
    ap.add_argument("--warm", required=True, choices=sorted(OPS), metavar="OP", help=f"one of {sorted(OPS)}")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--profile", default="gpu")
    ap.add_argument(
        "--problem",
        action="append",
        default=[],
        metavar="JSON",
        help="also warm this Problem (difftest's Problem.to_dict JSON); repeatable",
    )
    a = ap.parse_args(argv)
    if a.jobs < 1:
        ap.error(f"--jobs={a.jobs}: allowed an integer >= 1")
    try:
        a.extra = [Problem.from_dict(json.loads(j)).validate() for j in a.problem]
    except Exception as e:  # noqa: BLE001
        ap.error(f"--problem: {type(e).__name__}: {e}; allowed a Problem as JSON (Problem.to_dict)")
    return a


def _warm_main(argv) -> int:
    a = parse_warm_args(argv)
    why = site_problem(site_folder())
    if why:
        print(why, file=sys.stderr)
        return 2
    job = WarmJob(
        TileOpsAdapter(a.warm), warm_problems(a.warm, a.profile, a.extra), a.jobs, log=lambda m: print(m, flush=True)
    )
    c = job.wait()
    print(
        f"warmed {c['built']}/{c['requested']} tileops-{a.warm} shapes in {c['seconds']:.0f} s "
        f"with {c['jobs']} workers",
        flush=True,
    )
    for e in job.errors:
        print("  did not build:", e, flush=True)
    return 0


if __name__ == "__main__":  # --serve (the worker), or --warm OP [--jobs N]
    if "--serve" in sys.argv:
        _serve()
    else:
        sys.exit(_warm_main(sys.argv[1:]))
