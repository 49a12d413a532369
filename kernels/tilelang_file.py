"""A TileLang attention kernel loaded from a file the user names at run time (for example
TileLang's ``example_gqa_bwd.py``), never copied into the project.

Spec forms: ``-k tilelang-file:/path/to/kernel.py`` (the catalogue ``tilelang-file``), or
``-k tilelang-file`` with the path in ``$DIFFTEST_TILELANG_FILE``; either way the adapter's
spec (what reproducers and worker processes record) is ``tilelang-file:<absolute path>``.
Loading a file runs its code, so such a spec counts as an import spec
(``difftest.execute.adapter.is_import_spec``): ``difftest repro`` replays it only with
``--allow-import``.

The file must define the four ``@tilelang.jit`` functions of that example, with its
signatures (checked by parsing the file, before anything is imported):
``flashattn_fwd(batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N, groups)``
-> (O, lse) with out_idx [3, 4]; ``flashattn_bwd_preprocess(batch, heads, seq_len, dim_v)``
-> Delta; ``flashattn_bwd(batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N,
groups)`` writing dQ (fp32, atomics), dK, dV (fp16, atomics) in place;
``flashattn_bwd_postprocess(batch, heads, seq_len, dim_qk)`` -> dQ fp16. The adapter calls
them as the example's own ``_attention`` does (forward tiles 128 x 64, backward 64 x 32;
``_attention`` itself is not used: it is wrapped in ``torch.compile`` and hides the LSE).
Every size is a compile-time constant, so each shape is compiled once per function with
``tilelang.compile(prim, target="cuda", ...)`` and the file's own ``out_idx`` and
``pass_configs`` (the decorators name no target and ``auto`` finds none off a GPU).

Contract (the example's code; line numbers of TileLang's
``example_gqa_bwd.py``): fp16 only (``dtype = "float16"`` in every kernel, lines 18, 88, 127, 156);
BSHD, one ``seq_len`` for queries and keys (seqlen_q == seqlen_k); GQA with ``heads % groups
== 0`` and kv head ``q head // groups`` (lines 14, 153); dim_qk != dim_v allowed (defaults
192/128); softmax scale fixed to 1/sqrt(dim_qk) (lines 13, 151-152: no custom scale);
causal is top-left (``bx*bM+i >= k*bN+j``), which on square problems is either alignment;
nothing asserts a sequence-length multiple (out-of-range tiles rely on TileLang's
bounds legalisation: a campaign judges that). LSE: ``lse = log2(l) + m * scale`` with
``scale = log2(e)/sqrt(d)``, i.e. base 2 of the scaled logits, [B, H, S] fp32: natural =
lse * ln 2. dK/dV are fp16 atomics: not deterministic.

dQ guard: the example's ``make_dq_layout`` addresses ceil(seq_len/8)*8 rows of the caller's
seq_len-row dQ (results/bugs/tilelang-example/REPORT-dq-layout-overrun.md), so when
seq_len % 8 != 0 its atomics and the postprocess's reads run past the end of dQ: into dK or
whatever the caching allocator put next, which made the verdict depend on the allocator (the
same problem passed and failed in one campaign). The adapter hands the kernels dQ as the front
of a buffer followed by a NaN guard of ``GUARD_ROWS`` rows per batch: an over-run lands there,
not in dK or a difftest tensor, and what the kernel reads back is NaN, on every run. That is
not a narrowing: every sequence length stays in the capability (the example documents none).
"""

import ast
import hashlib
import importlib.util
import multiprocessing as mp
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from difftest.execute.adapter import KernelAdapter, KernelSpecError
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.safeio import safe_child_path
from difftest.strategies import edge_problems

from .bhsd import lse2_to_natural
from .cuda_common import cuda_reason, lse_bhs_to_thd, module_reason, normalize_lse, thd

PREFIX = "tilelang-file"
ENV = "DIFFTEST_TILELANG_FILE"
FUNCTIONS = {  # name -> the positional parameters the adapter passes
    "flashattn_fwd": ("batch", "heads", "seq_len", "dim_qk", "dim_v", "is_causal", "block_M", "block_N", "groups"),
    "flashattn_bwd_preprocess": ("batch", "heads", "seq_len", "dim_v"),
    "flashattn_bwd": ("batch", "heads", "seq_len", "dim_qk", "dim_v", "is_causal", "block_M", "block_N", "groups"),
    "flashattn_bwd_postprocess": ("batch", "heads", "seq_len", "dim_qk"),
}
FWD_TILES = (128, 64)  # the example's _attention.forward
BWD_TILES = (64, 32)  # the example's _attention.backward
GUARD_ROWS = 64  # NaN rows per batch after dQ: room for any layout rounding rows up to a 64-row tile

# The contract, as the example file states it (TileLang's ``example_gqa_bwd.py``, the
# TileLang example flash-attention backward with GQA and dim_qk != dim_v): its jit functions take
# batch, heads, seq_len, dim_qk, dim_v, is_causal and groups as free ints (:12, :87, :126, :150)
# and neither they nor the example's attention() assert anything on them. Its structure states
# the rest: fp16 only (dtype = "float16" in every function, :18, :88, :127), one seq_len for Q and
# K/V (seqlen_q == seqlen_k), the scale 1/sqrt(dim_qk) computed inside (no custom scale), GQA as
# heads // groups (:14), causal top-left == bottom-right on the square call, no window, varlen or
# sinks. Head dims: every multiple of 16 for qk and v independently -- dim_qk and dim_v are the
# contraction of T.gemm (:58, :69, :206), which steps by the fp16 MMA k-slice of 16 (the rule
# TileOPs 0.1.0 states for its TileLang kernels, _kernels/attention/call_spec.py:151-154); the
# old list (16/32/64/128/192/256, v without 192) was what had been seen working. A dim the file
# then fails to build or computes wrong (e.g. the preprocess's 32-wide dim_v tiles, :91-107, at
# dim_v 48) is a finding. 256 and max_* are campaign bounds on the compile cost (every new
# (batch, heads, seq_len, dims, causal, groups) is four TileLang compiles, ~60 s on an H200).
_DIMS16 = tuple(range(16, 257, 16))
CAPABILITY = Capability(
    dtypes=("float16",),
    head_dims_qk=_DIMS16,
    head_dims_v=_DIMS16,
    equal_head_dims=False,
    max_batch=2,
    max_seqlen=1024,
    max_heads=8,
    gqa=True,
    seqlen_q_ne_k=False,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    sinks=False,
    softmax_scale=False,
    outputs=("o", "lse", "dq", "dk", "dv"),
    deterministic=False,
    device="cuda",
    block_m=BWD_TILES[0],
    block_n=FWD_TILES[1],
    compile_key=("batch", "seqlen_q", "heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "causal"),
)


def resolve(path: str) -> Path:
    """The kernel file as an absolute path; a one-line KernelSpecError when it is no
    readable Python file defining the example's four jit functions (parsed, not run)."""
    if not path:
        raise KernelSpecError(f"{PREFIX}: no file given (use -k {PREFIX}:/path/to/kernel.py or set ${ENV})")
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise KernelSpecError(f"{PREFIX}: {path!r} is not a file")
    try:
        tree = ast.parse(p.read_text(), filename=str(p))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as e:
        raise KernelSpecError(f"{PREFIX}: cannot read {path!r} as Python: {type(e).__name__}: {e}") from None
    defs = {n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name, params in FUNCTIONS.items():
        if name not in defs:
            raise KernelSpecError(f"{PREFIX}: {path!r} defines no function {name!r} (needs {sorted(FUNCTIONS)})")
        if tuple(defs[name][: len(params)]) != params:
            raise KernelSpecError(
                f"{PREFIX}: {path!r}: {name}({', '.join(defs[name])}) does not take ({', '.join(params)})"
            )
    return p


_MODULES: dict[Path, object] = {}
_LOCK = threading.Lock()


def load(path: Path):
    """Import the file once per process under a private module name (runs its code)."""
    with _LOCK:
        if path not in _MODULES:
            name = "difftest_tilelang_file_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            _MODULES[path] = mod
        return _MODULES[path]


class TileLangFileAdapter(KernelAdapter):
    capability = CAPABILITY

    def __init__(self, path: str):
        self.path = resolve(path)
        self.name = f"{PREFIX}-{self.path.stem}"  # no ":" or "/": it names report files
        self.spec = f"{PREFIX}:{self.path}"
        self.description = f"TileLang GQA backward from {self.path} (the example_gqa_bwd.py interface)"
        self._kernels: dict[tuple, object] = {}

    def available(self) -> str | None:
        return cuda_reason() or module_reason("tilelang", "pip install tilelang")

    def kernel(self, fn: str, *args):
        """``fn`` of the file compiled for ``args`` (cached per process)."""
        key = (fn,) + args
        if key not in self._kernels:
            import tilelang  # lazy: tilelang is optional; the adapter loads and says so without it

            jit = getattr(load(self.path), fn)
            prim = jit.get_tir(*args)
            self._kernels[key] = tilelang.compile(
                prim,
                out_idx=jit.out_idx,
                target="cuda",
                execution_backend=jit.execution_backend,
                pass_configs=jit.pass_configs,
                compile_flags=jit.compile_flags,
            )
        return self._kernels[key]

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        c = call_args(p)
        q, k, v = (inputs.bshd(n).contiguous() for n in ("q", "k", "v"))
        o, lse2 = self.kernel("flashattn_fwd", *c["fwd"])(q, k, v)
        lse = normalize_lse(lse_bhs_to_thd(lse2_to_natural(lse2)), p)
        return Outputs(o=thd(o), lse=lse), (q, k, v, o, lse2)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        c = call_args(p)
        q, k, v, o, lse2 = ctx
        do = inputs.bshd("do").contiguous()
        delta = self.kernel("flashattn_bwd_preprocess", *c["prep"])(o, do)
        dq32 = guarded_zeros(q.shape, q.device)
        dk = torch.zeros(k.shape, dtype=torch.float16, device=q.device)
        dv = torch.zeros(v.shape, dtype=torch.float16, device=q.device)
        self.kernel("flashattn_bwd", *c["bwd"])(q, k, v, do, lse2, delta, dq32, dk, dv)
        dq = self.kernel("flashattn_bwd_postprocess", *c["post"])(dq32)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=thd(dq), dk=thd(dk), dv=thd(dv))


def guarded_zeros(shape, device) -> torch.Tensor:
    """float32 zeros of ``shape`` ([B, S, H, D]) at the front of a buffer whose tail, GUARD_ROWS
    rows per batch, holds NaN (see the module docstring: a dQ layout that over-runs the tensor
    writes there and reads NaN back)."""
    b, s, h, d = shape
    n = b * s * h * d
    buf = torch.full((n + b * GUARD_ROWS * h * d,), float("nan"), dtype=torch.float32, device=device)
    buf[:n].zero_()
    return buf[:n].view(*shape)


def call_args(p) -> dict:
    """The positional arguments of each jit function for Problem ``p`` (as the example's
    ``_attention`` derives them from the tensor shapes)."""
    if p.varlen or p.seqlen_q != p.seqlen_k or p.heads_q % p.heads_kv:
        raise ValueError(f"{PREFIX}: dense square problems with heads_q % heads_kv == 0 only; got {p.short()}")
    if p.softmax_scale is not None:
        raise ValueError(f"{PREFIX}: the kernel's scale is fixed to 1/sqrt(head_dim_qk); got {p.softmax_scale}")
    b, h, s, dqk, dv, g = p.batch, p.heads_q, p.seqlen_q, p.head_dim_qk, p.head_dim_v, p.heads_q // p.heads_kv
    return {
        "fwd": (b, h, s, dqk, dv, p.causal, *FWD_TILES, g),
        "prep": (b, h, s, dv),
        "bwd": (b, h, s, dqk, dv, p.causal, *BWD_TILES, g),
        "post": (b, h, s, dqk),
    }


def from_env() -> TileLangFileAdapter:
    """``-k tilelang-file``: the file named by $DIFFTEST_TILELANG_FILE."""
    return TileLangFileAdapter(os.environ.get(ENV, ""))


class _Entry:
    def __init__(self, path: str):
        self.path = path

    def factory(self) -> TileLangFileAdapter:
        return TileLangFileAdapter(self.path)


class _AnyPath(dict):
    """Entries keyed by any path: ``tilelang-file:PATH`` resolves PATH when the adapter is
    built (a missing or unsuitable file is then a one-line KernelSpecError)."""

    def __contains__(self, path) -> bool:
        return isinstance(path, str) and bool(path)

    def __getitem__(self, path) -> _Entry:
        return _Entry(path)


class Catalogue:
    """``tilelang-file:PATH`` (entry-point group ``difftest.catalogues``). ``imports_code``:
    a spec it serves runs the named file's code (``difftest.execute.adapter.is_import_spec``)."""

    imports_code = True

    def entries(self) -> dict:
        return _AnyPath()

    def skipped(self) -> dict[str, str]:
        return {}


CATALOGUE = Catalogue()


# ---------------------------------------------------------------- warming the disk cache
def warm_shapes(profile: str = "gpu") -> list[tuple[str, tuple]]:
    """(function, arguments) to compile for the edge corpus a campaign runs first, in its
    order, each distinct call once (every corner is a new shape: four compiles each)."""
    out = []
    for p in edge_problems(CAPABILITY, profile):
        a = call_args(p)
        for fn, key in (
            ("flashattn_fwd", "fwd"),
            ("flashattn_bwd_preprocess", "prep"),
            ("flashattn_bwd", "bwd"),
            ("flashattn_bwd_postprocess", "post"),
        ):
            if (fn, a[key]) not in out:
                out.append((fn, a[key]))
    return out


_WARM_ADAPTERS: dict[str, TileLangFileAdapter] = {}


def _build(path: str, fn: str, args: tuple) -> str | None:
    """Compile one call into TileLang's disk cache (a pool worker); the error, or None."""
    try:
        if path not in _WARM_ADAPTERS:
            _WARM_ADAPTERS[path] = TileLangFileAdapter(path)
        _WARM_ADAPTERS[path].kernel(fn, *args)
        return None
    except Exception as e:  # noqa: BLE001 -- a shape that does not build is reported, the rest still build
        return f"{fn}{args}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def warm(path: str, profile: str = "gpu", jobs: int = 8) -> list[str]:
    """Build the edge corpus's kernels on ``jobs`` processes (spawned: CUDA) before a
    campaign, so its serial per-shape compiles become disk-cache loads; returns the errors.
    ``jobs`` <= 1 builds here, one after another."""
    resolve(path)
    todo = warm_shapes(profile)
    if jobs <= 1:
        return [e for e in (_build(path, fn, a) for fn, a in todo) if e]
    with safe_child_path(), ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
        return [e for e in ex.map(_build, [path] * len(todo), [fn for fn, _ in todo], [a for _, a in todo]) if e]


if __name__ == "__main__":  # python -m difftest.kernels.tilelang_file --warm PATH [--jobs N]
    import argparse
    import time

    ap = argparse.ArgumentParser(description="build a TileLang kernel file's edge-corpus shapes in parallel")
    ap.add_argument("--warm", required=True, metavar="PATH")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--profile", default="gpu")
    a = ap.parse_args()
    t0 = time.perf_counter()
    try:
        errors = warm(a.warm, a.profile, a.jobs)
    except KernelSpecError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    n = len(warm_shapes(a.profile))
    print(f"warmed {n - len(errors)}/{n} kernels in {time.perf_counter() - t0:.0f} s", flush=True)
    for e in errors:
        print("  did not build:", e, flush=True)
