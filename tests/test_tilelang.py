"""Our TileLang kernels on the CPU (target="c"): gates, campaigns, determinism, compile
reuse, faults caught, and the CUDA lowering of the same source.

Compiles are the cost here (about 1-3 s per kernel on the shared CI machine), so the
tests share one in-process kernel cache: the problems below use few compile keys
(dtype, head dims, sinks) and vary everything that is runtime data to the kernels.
"""

import pytest

pytest.importorskip("tilelang", reason="tilelang is not installed: our TileLang kernels cannot build")

import torch  # noqa: E402

from difftest.execute.adapter import get  # noqa: E402
from difftest.judge.runner import RunConfig, run_case  # noqa: E402
from difftest.kernels.tilelang import cache  # noqa: E402
from difftest.kernels.tilelang.adapter import COMPILE_KEY, TileLangAttention  # noqa: E402
from difftest.model.inputs import make_inputs  # noqa: E402
from difftest.model.problem import Problem  # noqa: E402
from difftest.search.campaign import run_campaign  # noqa: E402

# One compile key (float32, 16/16, no sinks) unless a test says otherwise.
BASE = Problem(batch=1, seqlen_q=24, seqlen_k=24, heads_q=2, heads_kv=1, head_dim_qk=16, head_dim_v=16)

# Every feature our TileLang kernels serve, at CPU sizes. Tiles are 32x32, so 33/40/65 hit block tails.
FEATURES = [
    BASE,
    BASE.replace(seqlen_q=40, seqlen_k=65, heads_q=4, heads_kv=2, causal=True),  # GQA, causal bottom-right
    BASE.replace(seqlen_q=65, seqlen_k=40, causal=True, align="top_left", softmax_scale=0.7),
    BASE.replace(batch=2, seqlen_q=33, seqlen_k=33, window_left=5, window_right=2),  # sliding window
    BASE.replace(
        batch=4, seqlen_q=(7, 0, 33, 12), seqlen_k=(0, 9, 40, 12), heads_q=3, heads_kv=3, causal=True, pad_tail=5
    ),  # varlen, empty sequences, unused tail tokens
    BASE.replace(
        batch=2, seqlen_q=(20, 3), seqlen_k=(31, 0), heads_q=4, heads_kv=1, sinks=True, window_left=7, window_right=0
    ),  # MQA + sinks + window; rows that see only the sink
    BASE.replace(seqlen_q=50, seqlen_k=20, causal=True),  # bottom-right, sq > sk: 30 fully masked rows
    BASE.replace(heads_q=2, heads_kv=2, head_dim_qk=32, head_dim_v=16),  # qk != v head dims
    BASE.replace(dtype="float16", seqlen_q=40, seqlen_k=40, heads_q=4, heads_kv=2, causal=True),
]


@pytest.fixture(scope="module")
def kernels():
    return {m: TileLangAttention(m, device="cpu") for m in ("atomic", "deterministic")}


def test_registry_names_our_two_dq_strategies():
    a, d = get("tilelang"), get("tilelang-det")
    assert isinstance(a, TileLangAttention) and a.dq_mode == "atomic"
    assert isinstance(d, TileLangAttention) and d.dq_mode == "deterministic"
    cap = TileLangAttention("atomic", device="cpu").capability
    assert cap.compile_key == COMPILE_KEY == ("dtype", "head_dim_qk", "head_dim_v", "sinks")
    assert (cap.block_m, cap.block_n, cap.device) == (32, 32, "cpu")
    gpu = TileLangAttention("deterministic", device="cuda").capability
    assert gpu.deterministic and not TileLangAttention("atomic", device="cuda").capability.deterministic
    assert gpu.dtypes == ("float16", "bfloat16") and 192 in gpu.head_dims_qk


def test_bad_arguments_name_the_field_and_allowed_values():
    with pytest.raises(ValueError, match=r"dq_mode='fast'.*atomic.*deterministic"):
        TileLangAttention("fast")
    with pytest.raises(ValueError, match=r"mutant='nope'.*allowed"):
        TileLangAttention("atomic", mutant="nope")
    with pytest.raises(ValueError, match=r"device='tpu'.*allowed"):
        TileLangAttention("atomic", device="tpu")
    from difftest.kernels.tilelang import source

    with pytest.raises(ValueError, match=r"target='llvm'.*'c'.*'cuda'"):
        source.style("llvm")


@pytest.mark.parametrize("mode", ["atomic", "deterministic"])
@pytest.mark.slow
def test_every_feature_passes_all_gates(kernels, mode):
    k = kernels[mode]
    for p in FEATURES:
        case = run_case(k, p.validate(), RunConfig(determinism_runs=2))
        assert case.status == "passed", case.render()
        assert {"o", "lse", "dq", "dk", "dv"} <= {v.output for v in case.verdicts}
        if p.sinks:
            assert "dsink" in {v.output for v in case.verdicts}


@pytest.mark.slow
def test_runtime_fields_reuse_one_build(kernels):
    """Shapes, batch, heads, masks, alignment and scale are runtime data: after the first
    problem of a compile key, the others build nothing."""
    k = kernels["atomic"]
    k.run(make_inputs(BASE))
    before = cache.stats().builds
    for p in (
        BASE.replace(batch=3, seqlen_q=70, seqlen_k=50, heads_q=6, heads_kv=3),
        BASE.replace(causal=True, align="top_left", softmax_scale=0.2, seqlen_q=9, seqlen_k=41),
        BASE.replace(batch=2, seqlen_q=(0, 19), seqlen_k=(3, 0), window_left=1, window_right=4, pad_tail=2),
    ):
        k.run(make_inputs(p))
    assert cache.stats().builds == before
    k.run(make_inputs(BASE.replace(head_dim_v=32)))  # a compile-key field: a new main kernel
    assert cache.stats().builds > before


def test_deterministic_variant_is_bitwise_stable(kernels):
    p = FEATURES[5].replace(seed=11)  # GQA + sinks + varlen
    x = make_inputs(p)
    runs = [kernels["deterministic"].run(x) for _ in range(3)]
    for name, t in runs[0].items():
        for other in runs[1:]:
            assert torch.equal(t.view(torch.uint8), other.get(name).view(torch.uint8)), name
    case = run_case(kernels["deterministic"], p, RunConfig(determinism_runs=3))
    assert case.status == "passed", case.render()
    assert any(v.gate == "determinism" for v in case.verdicts)


def test_both_dq_strategies_agree(kernels):
    """Same math, different dQ reduction: results agree to rounding."""
    x = make_inputs(FEATURES[1])
    a, d = kernels["atomic"].run(x), kernels["deterministic"].run(x)
    for name in ("o", "lse", "dk", "dv"):
        assert torch.equal(a.get(name), d.get(name)), name
    torch.testing.assert_close(a.dq, d.dq, rtol=1e-5, atol=1e-6)


# slow for atomic: the deterministic campaign draws the same problems (the CPU capability is the same
# for both) over every compile key of the ci corpus and checks the same reuse; the atomic dQ runs on
# every feature in test_every_feature_passes_all_gates and against the deterministic one in
# test_both_dq_strategies_agree. Its own cost is the atomic kernels of the keys those leave out.
@pytest.mark.parametrize("mode", [pytest.param("atomic", marks=pytest.mark.slow), "deterministic"])
def test_ci_campaign_passes_and_reuses_compiles(kernels, mode):
    k = kernels[mode]
    cache.reset_stats()
    res = run_campaign(k, "ci", max_examples=12, database=None)
    assert res.status == "passed", res.failure.render() if res.failure else res.reason
    assert len(res.cases) >= 12 and all(c.status == "passed" for c in res.cases)
    s = cache.stats()
    # at most the 5 kernels (fwd, pre, dsink, main, post) per compile key, and most calls reuse them
    assert s.builds <= 5 * res.compile_keys
    assert s.hits > 3 * s.builds
    print(
        f"\n{mode}: {len(res.cases)} cases, {res.compile_keys} compile keys, {s.builds} builds "
        f"({s.build_seconds:.1f} s), {s.hits} cache hits, {res.elapsed:.1f} s"
    )


def _mutants():
    from difftest.kernels.tilelang.mutants import MUTANTS

    return MUTANTS


@pytest.mark.parametrize("name", ["tl-causal-off-by-one", "tl-dsink-sign", "tl-tail-block-skipped", "tl-gqa-head-map"])
def test_faulted_tilelang_kernel_fails_where_the_clean_one_passes(name):
    m = _mutants()[name]
    bad = run_case(m.make(), m.example)
    assert bad.status == "failed", bad.render()
    good = run_case(m.make_clean(), m.example)
    assert good.status == "passed", good.render()
    expected = {"tl-dsink-sign": {"dsink:budget"}}.get(name, {"dq:budget", "dk:budget"})
    assert expected <= set(bad.failed_gates), bad.failed_gates


@pytest.mark.slow
def test_campaign_finds_a_tilelang_fault():
    m = _mutants()["tl-tail-block-skipped"]
    res = run_campaign(m.make(), "quick", max_examples=12, shrink_budget=10, database=None)
    assert res.status == "failed"
    p = res.failure.problem
    assert any(n % 32 for n in p.seqlens_k)  # only a partial key block shows this fault


def test_mutants_merge_into_the_catalogue():
    from difftest.kernels.mutants import BUG_CLASSES, all_mutants

    merged = all_mutants()
    for name, m in _mutants().items():
        assert merged[name] is m and m.source == "tilelang" and m.bug_class in BUG_CLASSES
        assert get(f"mutant:{name}").name == f"mutant:{name}"


@pytest.mark.parametrize("kind", ["fwd", "main"])
@pytest.mark.slow
def test_same_source_lowers_for_cuda(kind):
    """The GPU build of the very kernels CI runs: lowered for sm_90 here (no GPU needed)."""
    from difftest.kernels.tilelang import cuda_check

    params = dict(cuda_check.gpu_configs(("float16",), ((128, 128),)))
    row = cuda_check.check(kind, params[kind], nvcc=False)
    assert row["lowered"] and "error" not in row, row
    assert row["source_chars"] > 1000


# ---------------------------------------------------------------- on the GPU (H200)
def _gpu_problem(p: Problem, dtype: str) -> Problem:
    dims = (
        dict(head_dim_qk=64, head_dim_v=64) if p.head_dim_qk == p.head_dim_v else dict(head_dim_qk=192, head_dim_v=128)
    )
    return p.replace(dtype=dtype, **dims).validate()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["atomic", "deterministic"])
def test_gpu_every_feature_passes_all_gates(mode, dtype):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    k = TileLangAttention(mode, device="cuda")
    runs = 20 if mode == "deterministic" else 1  # the determinism gate, 20 bitwise reruns
    for p in FEATURES:
        case = run_case(k, _gpu_problem(p, dtype), RunConfig(determinism_runs=runs))
        assert case.status == "passed", case.render()


def _variants():
    from difftest.kernels.tilelang.variants import VARIANTS

    return VARIANTS


def test_variants_merge_into_the_catalogue_as_other_builds():
    from difftest.kernels.tilelang.tiles import TILES
    from difftest.kernels.variants import CATALOGUE

    entries = CATALOGUE.entries()
    for name, v in _variants().items():
        k = get(f"variant:{name}")
        assert entries[name] is v and k.spec == f"variant:{name}" and v.description and v.models
        assert (k.tiles["block_m"], k.tiles["block_n"]) != (TILES[k.device]["block_m"], TILES[k.device]["block_n"])
        assert (k.capability.block_m, k.capability.block_n) == (k.tiles["block_m"], k.tiles["block_n"])


@pytest.mark.parametrize("name", ["tl-tiles-16x64", "tl-atomic-dq-64x16"])
@pytest.mark.slow
def test_tilelang_variant_is_correct_and_sums_in_another_order(name):
    """A correct variant passes every gate on a problem whose partial tiles differ from the
    shipped kernel's, and its dQ is not bit-identical to the shipped kernel's (another
    accumulation order really ran)."""
    p = Problem(
        batch=1,
        seqlen_q=70,
        seqlen_k=70,
        heads_q=2,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float32",
        causal=True,
        seed=5,
    )
    k = get(f"variant:{name}")
    case = run_case(k, p)
    assert case.status == "passed", case.render()
    x = make_inputs(p)
    got, shipped = k.run(x), TileLangAttention("deterministic").run(x)
    assert not torch.equal(got.dq, shipped.dq)
