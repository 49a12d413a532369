"""The ci profile on a CPU target compiles only what `difftest run` prebuilds (before,
`difftest run`'s cold run compiled three configurations one at a time inside the
tilelang-det campaign). Draws keep to ``corpus_configs`` (the edge corpus's
configurations plus one per compile-key value it lacks), the prebuild asks for every one
of them, the campaign reports ``compile:new_configuration`` as not exercised, and the
nightly and gpu profiles (and ci on a GPU) still open new configurations."""

from collections import Counter

import pytest

from difftest.judge.runner import CaseResult
from difftest.model.capability import Capability
from difftest.run import prebuild as warmup
from difftest.search.campaign import _coverage, run_campaign
from difftest.strategies import edge_problems, problems
from difftest.strategies.compile import NEW_CONFIG, corpus_configs, corpus_only
from difftest.vocab import Status
from tests.kernels_for_tests import ALL_FEATURES, RefKernel
from tests.test_strategies import draw_many

# the tilelang-det CPU capability (kernels/tilelang/adapter.py capability_for("cpu", True)),
# spelled out so these tests need neither tilelang nor its adapter
TL_CPU = Capability(
    dtypes=("float32", "float16"),
    head_dims_qk=(16, 32, 64),
    head_dims_v=(16, 32, 64),
    max_batch=4,
    max_seqlen=256,
    max_heads=8,
    deterministic=True,
    device="cpu",
    block_m=32,
    block_n=32,
    compile_key=("dtype", "head_dim_qk", "head_dim_v", "sinks"),
    **ALL_FEATURES,
)
TL_GPU = Capability(**{**TL_CPU.__dict__, "device": "cuda"})


class TileLangShaped(RefKernel):
    """The float32 reference with the TileLang CPU capability (compiles nothing)."""

    name = "test-tl-shaped"
    spec = "tests.test_compile_corpus:TileLangShaped"
    capability = TL_CPU


def _sigs(ps, c=TL_CPU) -> set:
    return {c.compile_signature(p) for p in ps}


def _prebuilt(kernel, profile="ci") -> set:
    return _sigs(warmup.campaign_problems(kernel, profile, None), kernel.capability)


@pytest.mark.slow
def test_ci_draws_on_a_cpu_target_keep_to_what_the_prebuild_builds():
    assert corpus_only(TL_CPU, "ci")
    prebuilt = _prebuilt(TileLangShaped())
    drawn = draw_many(problems(TL_CPU, "ci"), 400)
    assert _sigs(drawn) <= prebuilt  # fails on the old strategy: 10% of draws opened a new configuration
    # every value of every compile-key field the profile reaches still runs
    corpus = corpus_configs(TL_CPU, "ci")
    assert {p.dtype for p in drawn} == set(TL_CPU.dtypes)
    assert {p.head_dim_qk for p in drawn} == set(TL_CPU.head_dims_qk)  # the edge corpus alone lacks 32
    assert {p.head_dim_v for p in drawn} == set(TL_CPU.v_dims)
    assert {p.sinks for p in drawn} == {False, True}
    assert _sigs(corpus) >= _sigs(edge_problems(TL_CPU, "ci"))
    # the draws spread over the corpus and still vary everything outside the compile key
    assert len(_sigs(drawn)) == len(corpus)
    assert len({(p.seqlen_q, p.seqlen_k) for p in drawn}) > 30 and len({p.values for p in drawn}) > 3


@pytest.mark.slow
def test_the_seeded_ci_campaign_compiles_nothing_outside_the_prebuild_and_says_so():
    kernel = TileLangShaped()
    res = run_campaign(kernel, "ci", max_examples=15, database=None, time_budget=600)
    assert res.status == "passed" and len(res.cases) > 15
    assert _sigs(c.problem for c in res.cases) <= _prebuilt(kernel)
    assert NEW_CONFIG in res.coverage["missing"]


@pytest.mark.slow
def test_nightly_gpu_and_ci_on_a_gpu_keep_opening_new_configurations():
    for cap, profile in ((TL_CPU, "nightly"), (TL_CPU, "gpu"), (TL_GPU, "ci")):
        assert not corpus_only(cap, profile)
        drawn = draw_many(problems(cap, profile), 300)
        fresh = _sigs(drawn, cap) - _sigs(corpus_configs(cap, profile), cap)
        assert fresh, (cap.device, profile)
    # an explicit probability is obeyed under ci too
    assert _sigs(draw_many(problems(TL_CPU, "ci", new_compile_p=1.0), 100)) - _sigs(corpus_configs(TL_CPU, "ci"))


def test_a_compile_key_with_shape_fields_keeps_drawing_new_configurations_under_ci():
    shaped = Capability(**{**TL_CPU.__dict__, "compile_key": ("dtype", "seqlen_q")})
    assert not corpus_only(shaped, "ci")


def test_coverage_lists_new_configuration_until_a_case_compiles_one():
    corpus = corpus_configs(TL_CPU, "ci")
    inside = [CaseResult("k", p, Status.PASSED) for p in corpus]
    cov = _coverage(inside, TL_CPU, "ci")
    assert NEW_CONFIG in cov["missing"] and NEW_CONFIG not in cov["hit"]
    outside = corpus[0].replace(dtype="float16", head_dim_qk=64, head_dim_v=16, sinks=True)
    assert TL_CPU.compile_signature(outside) not in _sigs(corpus)
    cov = _coverage(inside + [CaseResult("k", outside, Status.PASSED)], TL_CPU, "nightly")
    assert cov["hit"][NEW_CONFIG] == 1 and NEW_CONFIG not in cov["missing"]
    # a kernel without a compile key has no such feature
    plain = Capability(**{**TL_CPU.__dict__, "compile_key": ()})
    assert NEW_CONFIG not in _coverage(inside, plain, "ci")["missing"]
    assert Counter(_coverage(inside, plain, "ci")["hit"]).get(NEW_CONFIG) is None
