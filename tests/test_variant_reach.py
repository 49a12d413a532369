"""The catalogue on CUDA covers what the production GPU kernels it stands for claim.

A correct kernel, sdpa-math, failed on the GPU on a float32 problem with head dim 3
over 1,458 keys, and the catalogue could not have met that problem: every variant declared
head dims from 8 and 256 rows. Here each built-in GPU kernel's capability (resolved from the
registry as tests/capability_snapshot.py resolves them, the installed entry points by name, plus
our TileLang kernels' CUDA capability; none needs a GPU to resolve) is compared, dtype by dtype, with the union of the
CUDA capabilities of the variants of that dtype (``variant-cuda:NAME``, kernels/variants.py):
head dims up to the gpu profile's max_head_dim, unequal head dims, the longest rows and most
heads up to the gpu profile's, every feature, mask alignment, layout, output and value kind,
non-determinism. A claim no variant can model is listed in ``NOT_MODELLED`` with its reason.
max_batch is not compared: sequences never share a sum in any kernel (dSink's sum over a
batch's rows is as long as one long sequence's, which the rows cover).
"""

from importlib.metadata import entry_points

import pytest

from difftest.execute import adapter as registry
from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.tilelang.adapter import capability_for
from difftest.kernels.variants import GPU, VARIANTS
from difftest.model.problem import Problem
from difftest.strategies.edges import SDPA_MATH_LONG_ROWS, edge_problems

FEATURES = (
    "gqa",
    "seqlen_q_ne_k",
    "causal",
    "window",
    "negative_window",
    "varlen",
    "empty_seqs",
    "pad_tail",
    "sinks",
    "softmax_scale",
    "softcap",
)
# registered kernels that are not a production kernel of this repository
NOT_PRODUCTION = {"tilelang-file": "the user's own TileLang file (-k tilelang-file:PATH): no capability of its own"}
# (kernel, claim) -> why no variant models it
NOT_MODELLED = {
    ("cudnn-fp8", "float8_e4m3fn: non-deterministic"): "no FP8 variant accumulates in a varying order: the FP8 store "
    "of every output (a 2^-4 relative step for e4m3) dwarfs any float32 summation order before it",
    ("cudnn-fp8", "float8_e5m2: non-deterministic"): "as for e4m3 (a 2^-3 step)",
}
MUST_RESOLVE = {
    "sdpa-math",
    "sdpa-efficient",
    "sdpa-flash",
    "sdpa-cudnn",
    "fa3",
    "fa4",
    "flex",
    "fla-attn",
    "cudnn",
    "cudnn-fp8",
    "tilelang (cuda)",
    "tilelang-det (cuda)",
}


def production_gpu_capabilities() -> dict:
    """Every built-in kernel's capability (the entry points pyproject.toml installs: not what a
    test registered at run time) whose device is CUDA, and our TileLang kernels' CUDA one."""
    caps = {}
    for name in sorted({ep.name for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}):
        if name in NOT_PRODUCTION:
            continue
        c = registry.get(name).capability  # a kernel that no longer resolves fails here, not silently
        if c.device == "cuda":
            caps[name] = c
    for det in (False, True):  # our TileLang kernels as they build on a GPU host
        caps[f"tilelang{'-det' if det else ''} (cuda)"] = capability_for("cuda", det)
    return caps


def catalogue_on_cuda() -> list:
    """The blockwise variants' CUDA capabilities (the TileLang variants pick their device by the
    host, so the union is taken without them: it is the same on every machine)."""
    return [v.cuda().capability for v in VARIANTS.values()]


def uncovered(kernel, variants) -> list[str]:
    """The claims of ``kernel`` that no CUDA variant of the same dtype makes."""
    out = []
    for dt in kernel.dtypes:
        vs = [c for c in variants if dt in c.dtypes]
        if not vs:
            out.append(f"{dt}: no variant")
            continue

        def union(attr):
            return set().union(*(getattr(c, attr) for c in vs))

        dims = [
            (attr, sorted({d for d in getattr(kernel, attr) if d <= GPU.max_head_dim} - union(attr)))
            for attr in ("head_dims_qk", "v_dims")
        ]
        out += [f"{dt}: {attr} {missing[:8]}" for attr, missing in dims if missing]
        out += [f"{dt}: {f}" for f in FEATURES if getattr(kernel, f) and not any(getattr(c, f) for c in vs)]
        if not kernel.equal_head_dims and all(c.equal_head_dims for c in vs):
            out.append(f"{dt}: head_dim_qk != head_dim_v")
        for attr in ("max_seqlen", "max_heads"):
            if min(getattr(kernel, attr), getattr(GPU, attr)) > max(getattr(c, attr) for c in vs):
                out.append(f"{dt}: {attr} {getattr(kernel, attr)}")
        if min(kernel.min_seqlen_q, kernel.min_seqlen_k) < min(min(c.min_seqlen_q, c.min_seqlen_k) for c in vs):
            out.append(f"{dt}: sequences shorter than every variant's")
        for attr in ("aligns", "layouts", "outputs"):
            missing = set(getattr(kernel, attr)) - union(attr)
            if missing:
                out.append(f"{dt}: {attr} {sorted(missing)}")
        if kernel.values is None and all(c.values is not None for c in vs):
            out.append(f"{dt}: every value kind")
        elif (
            kernel.values is not None
            and not set(kernel.values) <= set().union(*(c.values or () for c in vs))
            and all(c.values is not None for c in vs)
        ):
            out.append(f"{dt}: values {kernel.values}")
        if not kernel.deterministic and all(c.deterministic for c in vs):
            out.append(f"{dt}: non-deterministic")
    return out


def test_the_catalogue_on_cuda_covers_every_production_gpu_kernel():
    prod = production_gpu_capabilities()
    assert set(prod) >= MUST_RESOLVE
    variants = catalogue_on_cuda()
    misses = {(name, claim) for name, cap in prod.items() for claim in uncovered(cap, variants)}
    assert misses - set(NOT_MODELLED) == set(), "the CUDA catalogue covers less than these kernels claim"
    assert set(NOT_MODELLED) - misses == set(), "listed as not modelled but covered now: drop it from NOT_MODELLED"


def test_a_narrower_catalogue_is_caught():
    """The comparison fails the catalogue as it was (its CPU sizes: head dims from 8, 256 rows),
    on the issue's head dim 3 and on sdpa-math's rows, and fails it without the variants that
    take the gpu profile's longest rows (FA3's 8192)."""
    from dataclasses import replace

    prod = production_gpu_capabilities()
    cpu_sized = [replace(v.factory.capability, device="cuda") for v in VARIANTS.values()]
    misses = uncovered(prod["sdpa-math"], cpu_sized)
    assert "float32: max_seqlen 2048" in misses
    assert any(m.startswith("float32: head_dims_qk [1, 2, 3, 4, 5, 6, 7, 9]") for m in misses), misses
    shorter = [c for c in catalogue_on_cuda() if c.max_seqlen < GPU.max_seqlen]
    assert "float16: max_seqlen 8192" in uncovered(prod["fa3"], shorter)


def test_the_sdpa_math_reproducer_is_in_the_gpu_corpora_only():
    p = Problem(**SDPA_MATH_LONG_ROWS)
    assert p in edge_problems(registry.get("sdpa-math").capability, "gpu")
    takers = [n for n, v in VARIANTS.items() if v.cuda().capability.covers(p)]
    assert {
        "sdpa-math-composite",
        "whole-row-device-gemm",
        "sequential-fp32-gemm-one-tile",
        "rounded-mma-operands",
    } <= set(takers)
    for n in takers:
        assert p in edge_problems(VARIANTS[n].cuda().capability, "gpu"), n
    for cpu in ("torch-blockwise", "sdpa-cpu-math", "variant:sequential-fp32-gemm-one-tile"):
        assert p not in edge_problems(registry.get(cpu).capability, "nightly")


@pytest.mark.parametrize(
    "name", ["sdpa-math-composite", "whole-row-splitk-gemm", "sequential-fp32-gemm-one-tile", "tiles-64x128"]
)
def test_cuda_variants_pass_the_sdpa_math_reproducer(name):
    """What the catalogue could not meet before: the problem sdpa-math failed on the H100, run
    here on the CPU by the variants' CUDA forms (the math backend's composite itself, split-K
    and sequential whole-row GEMMs, GPU-sized tiles), under every gate."""
    case = run_case(VARIANTS[name].cuda(), Problem(**SDPA_MATH_LONG_ROWS), RunConfig(device="cpu"))
    assert case.status == "passed", [v.label for v in case.verdicts if not v.passed] or case.reason
