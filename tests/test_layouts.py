"""Memory layouts (difftest/model/layouts.py): each materialisation keeps every value and has
the strides, offsets and alignment its name says; the kernel receives the laid-out
tensors while the references keep the logical ones; strategies draw every declared
layout and shrink to contiguous; the edge corpus and coverage name each layout; a
reproducer round-trips it; and the layout mutants are killed while the clean kernel
passes every layout."""

import json

import pytest
import torch
from hypothesis import Phase, find, settings

from difftest.judge.runner import RunConfig, run_case
from difftest.kernels import mutants as catalogue
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.measure import mutants as mutants_cmd
from difftest.model.capability import Capability, parse_narrowing
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.layouts import ALIGNED_OFFSET, CONTIGUOUS, DIM_PAD, LAYOUTS, MISALIGNED_OFFSET, Layout
from difftest.model.outputs import is_poison
from difftest.model.problem import Problem, ProblemError
from difftest.search.reproducer import load, write_reproducer
from difftest.search.shrinking import simplify
from difftest.strategies import edge_problems, expected_features, features, problems
from tests.drawing import draw_many
from tests.kernels_for_tests import full_capability

DENSE = Problem(batch=2, seqlen_q=5, seqlen_k=7, heads_q=4, heads_kv=1, head_dim_qk=16, head_dim_v=8, dtype="float16")
VARLEN = Problem(
    batch=3,
    seqlen_q=(4, 0, 6),
    seqlen_k=(0, 3, 5),
    heads_q=3,
    heads_kv=1,
    head_dim_qk=8,
    head_dim_v=8,
    pad_tail=2,
    sinks=True,
)
ALL = full_capability(dtypes=("float32", "float16"), head_dims_qk=(8, 16, 32), max_heads=4, layouts=LAYOUTS)


def _laid(p: Problem, kind: str):
    p = p.replace(layout=kind).validate()
    x = make_inputs(p)
    return p, x, lay_out(x)


def _handed(inp, name):
    return getattr(inp, name) if inp.problem.varlen else inp.bshd(name)


@pytest.mark.parametrize("base", [DENSE, VARLEN], ids=["dense", "varlen"])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_materialisation_keeps_every_value(base, kind):
    p, x, y = _laid(base, kind)
    if kind != "kv_broadcast":  # the digest reads values and shapes, whatever the memory
        assert y.digest() == x.digest()
    for name in ("q", "k", "v", "do"):
        got, want = _handed(y, name), _handed(x, name)
        if kind == "kv_broadcast" and name in ("k", "v"):
            assert got.shape[-2] == p.heads_q and want.shape[-2] == 1
            want = want.expand_as(got)
        assert torch.equal(got, want), (kind, name)
        for b in range(p.batch):  # one sequence's rows, as a kernel walks them
            rows, ref = y.rows(name, b), x.rows(name, b)
            assert torch.equal(rows, ref.expand_as(rows)), (kind, name, b)
    assert y.sink is x.sink and y.cu_seqlens_q is x.cu_seqlens_q


@pytest.mark.parametrize("base", [DENSE, VARLEN], ids=["dense", "varlen"])
def test_each_layout_has_the_strides_offsets_and_alignment_it_names(base):
    mqa, base = base, base.replace(heads_kv=base.heads_q)  # every head dim > 1: strides all matter
    _, x, y = _laid(base, "contiguous")
    assert y is x  # today's layout: nothing re-materialised

    p, x, y = _laid(base, "bhsd")
    for name in ("q", "k", "v", "do"):
        t = _handed(y, name)
        n, h, d = t.shape[-3:]
        assert t.stride()[-3:] == (d, n * d, 1), (name, t.stride())  # head-major memory
        if not p.varlen:
            assert t.stride(0) == h * n * d  # BHSD: batch outermost
    # a dense head-major tensor with batch > 1 has no packed view: the packed field copies
    assert not y.q.is_contiguous() if p.varlen else y.q.is_contiguous()

    p, x, y = _laid(base, "do_transposed")
    assert all(_handed(y, n).is_contiguous() for n in ("q", "k", "v"))
    t = _handed(y, "do")
    assert not t.is_contiguous() and t.stride(-2) == t.shape[-3] * t.shape[-1]

    p, x, y = _laid(base, "dim_slice")
    for name in ("q", "k", "v", "do"):
        t = _handed(y, name)
        d = t.shape[-1]
        assert t.stride(-1) == 1 and t.stride(-2) == d + DIM_PAD
        wide = torch.as_strided(t, (*t.shape[:-1], d + DIM_PAD), t.stride(), t.storage_offset())
        pad = wide[..., d:]
        assert torch.isnan(pad).all() and not is_poison(pad).any()  # NaN, never zero, not the output marker

    for kind, offset, aligned in (("offset", ALIGNED_OFFSET, True), ("misaligned", MISALIGNED_OFFSET, False)):
        p, x, y = _laid(base, kind)
        for name in ("q", "k", "v", "do"):
            t = _handed(y, name)
            assert t.is_contiguous() and t.storage_offset() == offset
            assert (t.data_ptr() % 16 == 0) is aligned, (kind, name, t.data_ptr() % 16)
            before = torch.as_strided(t, (offset,), (1,), 0)
            assert torch.isnan(before).all()

    p, x, y = _laid(mqa, "kv_broadcast")
    for name in ("k", "v"):
        t = _handed(y, name)
        assert t.shape[-2] == p.heads_q and t.stride(-2) == 0  # expand of the single head
        assert t.untyped_storage().nbytes() == _handed(x, name).untyped_storage().nbytes()
    assert _handed(y, "q").is_contiguous() and _handed(y, "do").is_contiguous()


def test_kv_broadcast_needs_one_kv_head_and_several_query_heads():
    with pytest.raises(ProblemError, match="heads_kv=1 and heads_q >= 2"):
        Problem(heads_q=4, heads_kv=2, layout="kv_broadcast").validate()
    with pytest.raises(ProblemError, match="heads_kv=1 and heads_q >= 2"):
        Problem(heads_q=1, heads_kv=1, layout="kv_broadcast").validate()
    with pytest.raises(ProblemError, match="one of"):
        Problem(layout="strided").validate()


def test_layout_round_trips_through_json_and_names_itself():
    for kind in LAYOUTS:
        p = DENSE.replace(layout=kind).validate()
        assert isinstance(p.layout, Layout) and p.layout.kind == kind
        d = json.loads(p.to_json())
        assert d["layout"] == kind
        assert Problem.from_json(p.to_json()) == p
        assert (f"layout:{kind}" in p.short()) is (kind != "contiguous")
    old = json.loads(DENSE.to_json())
    del old["layout"]  # a reproducer written before layouts existed
    assert Problem.from_dict(old).layout == CONTIGUOUS
    assert Problem(layout={"kind": "bhsd"}).layout == Layout("bhsd")


def test_capability_declares_layouts_contiguous_only_by_default():
    default = Capability()
    assert default.layouts == ("contiguous",)
    assert "layout bhsd not in ('contiguous',)" in default.excludes(Problem(layout="bhsd"))
    assert ALL.excludes(Problem(head_dim_qk=8, head_dim_v=8, layout="bhsd")) is None
    assert parse_narrowing(["layouts=contiguous,offset"]) == {"layouts": ("contiguous", "offset")}  # --narrow
    narrowed = ALL.narrowed(layouts=("contiguous", "offset"))
    assert narrowed.excludes(Problem(head_dim_qk=8, head_dim_v=8, layout="bhsd"))
    with pytest.raises(ValueError, match="layouts"):
        default.narrowed(layouts=("bhsd",))
    with pytest.raises(ValueError, match="Capability.layouts"):
        Capability(layouts=("strided",))
    run = run_case(BlockwiseAttention(), Problem(layout="bhsd"))  # blockwise declares them all
    assert run.status == "passed"
    outside = run_case(catalogue.MUTANTS["dsink-missing"].make(), Problem(layout="bhsd"))
    assert outside.status == "passed"  # mutants inherit the clean kernel's capability


# ----------------------------------------------------------------------------- strategies
@pytest.mark.slow
def test_strategies_draw_every_declared_layout_inside_the_capability():
    # Every declared kind is reachable: a search for it succeeds (a fixed count of draws was fragile: the
    # rare kv_broadcast, which needs heads_kv == 1, fell out of 600 draws on a fresh clone under xdist).
    # Reaching it is the property, so the search stops at the first such draw (no shrinking).
    for kind in LAYOUTS:
        found = find(
            problems(ALL, "ci"),
            lambda p, kind=kind: p.layout.kind == kind,
            settings=settings(
                max_examples=2000, database=None, derandomize=True, deadline=None, phases=[Phase.generate]
            ),
        )
        assert found.layout.kind == kind and ALL.excludes(found) is None, (kind, found.short())
    ps = draw_many(problems(ALL, "ci"), 300)
    share = sum(p.layout == CONTIGUOUS for p in ps) / len(ps)
    assert 0.3 < share < 0.8  # half the draws keep the simplest layout
    for p in ps:
        assert ALL.excludes(p) is None, (p.short(), ALL.excludes(p))
    some = ALL.narrowed(layouts=("contiguous", "dim_slice"))
    assert {p.layout.kind for p in draw_many(problems(some, "quick"), 100)} == {"contiguous", "dim_slice"}
    # an MHA-only kernel that declares kv_broadcast gets its MQA draws as that layout only
    mha = Capability(dtypes=("float32",), head_dims_qk=(8,), gqa=False, layouts=("contiguous", "kv_broadcast"))
    drawn = draw_many(problems(mha, "ci"), 200)
    assert any(p.layout.kind == "kv_broadcast" for p in drawn)
    assert all(p.layout.kind == "kv_broadcast" for p in drawn if p.heads_kv != p.heads_q)
    assert all(mha.excludes(p) is None for p in drawn)
    # an adapter that declares nothing keeps getting contiguous tensors only
    plain = Capability(dtypes=("float32",), head_dims_qk=(8,))
    assert {p.layout.kind for p in draw_many(problems(plain, "quick"), 100)} == {"contiguous"}


def test_layout_draws_shrink_toward_contiguous():
    s = problems(ALL, "quick")
    cfg = settings(
        database=None, max_examples=5000, deadline=None, derandomize=True, phases=[Phase.generate, Phase.shrink]
    )
    assert find(s, lambda p: True, settings=cfg).layout == CONTIGUOUS
    # a failure that needs a non-contiguous layout shrinks to the earliest kind in LAYOUTS
    assert find(s, lambda p: p.layout != CONTIGUOUS, settings=cfg).layout.kind == LAYOUTS[1]
    smallest = find(s, lambda p: p.layout.kind == "kv_broadcast", settings=cfg)
    assert (smallest.heads_q, smallest.heads_kv) == (2, 1)  # the smallest problem that can take it
    # difftest's own shrinking finishes there too: a layout-blind failure drops the layout
    p = Problem(batch=2, seqlen_q=9, seqlen_k=9, head_dim_qk=16, head_dim_v=16, layout="dim_slice")
    best, _ = simplify(p, lambda c: c.seqlen_q >= 2, ALL, time_budget=30)
    assert best.layout == CONTIGUOUS and best.seqlen_q == 2


def test_edge_corpus_covers_each_declared_layout_once_after_its_contiguous_twin():
    edges = edge_problems(ALL)
    laid = [p for p in edges if p.layout != CONTIGUOUS]
    assert sorted(p.layout.kind for p in laid) == sorted(LAYOUTS[1:])
    for p in laid:
        twin = p.replace(layout=CONTIGUOUS)
        assert twin in edges and edges.index(twin) < edges.index(p)
        assert p.batch == 2 and p.seqlen_q != p.seqlen_k
    assert all(p.layout == CONTIGUOUS for p in edge_problems(Capability()))


def test_coverage_counts_layout_features():
    e = expected_features(ALL)
    assert {f"layout:{k}" for k in LAYOUTS} <= e
    assert {f for f in expected_features(Capability()) if "layout" in f} == {"layout:contiguous"}
    no_gqa = Capability(gqa=False, layouts=LAYOUTS)  # an MHA-only kernel still meets broadcast K/V
    assert "layout:kv_broadcast" in expected_features(no_gqa)
    assert "layout:kv_broadcast" not in expected_features(Capability(gqa=False, layouts=LAYOUTS, max_heads=1))
    assert "layout:misaligned" in features(DENSE.replace(layout="misaligned"), ALL)


# ----------------------------------------------------------------------------- runner, reproducers
class Spy(BlockwiseAttention):
    """The clean kernel, recording what memory it was handed."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def load(self, inputs, name, b):
        t = _handed(inputs, name)
        self.seen.append((name, t.stride(), t.storage_offset()))
        return super().load(inputs, name, b)


def test_kernel_receives_the_laid_out_tensors_and_references_the_logical_ones():
    p = DENSE.replace(heads_kv=4, layout="bhsd")
    spy = Spy()
    case = run_case(spy, p)
    assert case.status == "passed", case.render()
    strides = {n: s for n, s, _ in spy.seen}
    assert strides["q"] == (4 * 5 * 16, 16, 5 * 16, 1) and strides["do"] == (4 * 5 * 8, 8, 5 * 8, 1)
    assert case.input_digest == run_case(BlockwiseAttention(), p.replace(layout=CONTIGUOUS)).input_digest
    spy = Spy()
    assert run_case(spy, p.replace(layout="offset"), RunConfig(isolate=False)).status == "passed"
    assert {o for _, _, o in spy.seen} == {ALIGNED_OFFSET}


def test_isolated_worker_lays_out_the_inputs_too():
    case = run_case(
        catalogue.MUTANTS["storage-offset-ignored"].make(),
        DENSE.replace(layout="offset"),
        RunConfig(isolate=True, timeout_s=120),
    )
    assert case.status == "failed", case.render()


def test_reproducer_records_the_layout(tmp_path):
    m = catalogue.MUTANTS["contiguous-strides-assumed"]
    case = run_case(m.make(), m.example)
    assert case.status == "failed"
    paths = write_reproducer(m.make(), case, RunConfig(), tmp_path)
    spec, problem, cfg = load(paths["json"])  # the checked JSON form replays it
    assert problem == m.example and problem.layout.kind == "bhsd"
    assert run_case(m.make(), problem, RunConfig.from_dict(cfg)).status == "failed"
    script = open(paths["py"]).read()
    assert "layout:bhsd" in script and '"layout": "bhsd"' in script  # the standalone script carries it too


# ----------------------------------------------------------------------------- kernels
CLEAN_CASES = [
    Problem(
        batch=2,
        seqlen_q=20,
        seqlen_k=37,
        heads_q=4,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=8,
        dtype="float16",
        causal=True,
    ),
    Problem(
        batch=3,
        seqlen_q=(4, 0, 36),
        seqlen_k=(0, 3, 35),
        heads_q=2,
        heads_kv=1,
        head_dim_qk=24,
        head_dim_v=24,
        pad_tail=2,
        sinks=True,
        dtype="bfloat16",
        window_left=5,
    ),
]


@pytest.mark.parametrize("kind", LAYOUTS)
def test_clean_kernel_passes_every_layout(kind):
    for p in CLEAN_CASES:
        case = run_case(BlockwiseAttention(), p.replace(layout=kind))
        assert case.status == "passed", case.render()


LAYOUT_MUTANTS = sorted(n for n, m in catalogue.MUTANTS.items() if m.bug_class == "layout")


def test_layout_mutants_cover_strides_offsets_alignment_and_the_stride_blind_cache():
    assert {
        "contiguous-strides-assumed",
        "storage-offset-ignored",
        "aligned-base-assumed",
        "stride-blind-kernel-cache",
    } <= set(LAYOUT_MUTANTS)
    for name in LAYOUT_MUTANTS:  # each one is invisible to a campaign that never varies layouts
        m = catalogue.MUTANTS[name]
        assert run_case(m.make(), m.example.replace(layout=CONTIGUOUS)).status == "passed", name


@pytest.mark.parametrize("name", LAYOUT_MUTANTS)
@pytest.mark.slow
def test_ci_profile_kills_each_layout_mutant(name, tmp_path):
    """The ci campaign (edge corpus first, then seeded draws) kills it, and the kill is
    genuine: the shrunk failing Problem passes on the clean kernel."""
    row = mutants_cmd.run_mutant(
        catalogue.MUTANTS[name], "ci", per_mutant_budget=60, shrink_budget=10, out_dir=tmp_path, database=None
    )
    assert row.status == "killed", (row.status, row.reason)
    assert row.clean_passes is True
    assert "layout:" in row.problem  # what killed it is a layout


@pytest.mark.parametrize("kind", LAYOUTS)
def test_sdpa_cpu_adapters_take_every_layout_and_get_the_laid_out_memory(kind):
    from difftest.kernels.sdpa_cpu import SdpaCpuFlash, SdpaCpuMath

    cases = [
        Problem(
            batch=2,
            seqlen_q=20,
            seqlen_k=37,
            heads_q=4,
            heads_kv=1,
            head_dim_qk=16,
            head_dim_v=16,
            dtype="float16",
            causal=True,
        ),
        Problem(
            batch=3,
            seqlen_q=(4, 0, 36),
            seqlen_k=(0, 3, 35),
            heads_q=3,
            heads_kv=1,
            head_dim_qk=8,
            head_dim_v=8,
            pad_tail=2,
            window_left=3,
        ),
    ]
    for kernel in (SdpaCpuMath(), SdpaCpuFlash()):
        assert kind in kernel.capability.layouts
        for p in cases:
            p = p.replace(layout=kind)
            case = run_case(kernel, p)
            assert case.status == "passed", case.render()
            x = lay_out(make_inputs(p))
            _, (q, k, v, _) = kernel.forward(x)
            for name, leaf in (("q", q), ("k", k), ("v", v)):  # the very memory difftest laid out
                t = _handed(x, name)
                assert (leaf.data_ptr(), leaf.stride()) == (t.data_ptr(), t.stride()), (kernel.name, name)


# ----------------------------------------------------------------------------- GPU adapters' translation, on the CPU
@pytest.mark.parametrize("kind", LAYOUTS)
def test_gpu_adapters_hand_the_laid_out_memory_and_translate_back(kind):
    """SDPA's math backend runs on the CPU, and FlexAttention's forward does: the GPU
    adapters' layout translation (laid-out leaves, dO in its layout, kv_broadcast folded)
    gives the float64 truth's values for every layout."""
    from difftest.kernels.flex import FlexAdapter
    from difftest.kernels.sdpa_cuda import SdpaAdapter
    from difftest.oracles.reference import reference

    dense = Problem(
        batch=2,
        seqlen_q=9,
        seqlen_k=14,
        heads_q=4,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=16,
        causal=True,
        align="top_left",
        layout=kind,
    ).validate()
    x = make_inputs(dense)
    truth = reference(x, "float64")
    sdpa = SdpaAdapter("math")
    got = sdpa.run(lay_out(x))
    for n in ("o", "dq", "dk", "dv"):
        assert got.get(n).shape == truth.get(n).shape, n
        assert (got.get(n) - truth.get(n)).abs().max() < 1e-4, (kind, n)
    y = lay_out(x)
    _, ctx = sdpa.forward(y)
    assert (ctx[0].data_ptr(), ctx[0].stride()) == (y.bshd("q").data_ptr(), y.bshd("q").stride())
    varlen = Problem(
        batch=2,
        seqlen_q=(4, 6),
        seqlen_k=(9, 2),
        heads_q=2,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=16,
        window_left=2,
        window_right=0,
        layout=kind,
    ).validate()
    for p in (dense, varlen):
        x = make_inputs(p)
        fwd, _ = FlexAdapter().translate(lay_out(x), grad=False)
        truth = reference(x, "float64")
        for got, want in ((fwd.o, truth.o), (fwd.lse, truth.lse)):  # equal infinities (-inf LSE rows) match
            err = torch.where(got.double() == want, 0.0, (got.double() - want).abs())
            assert err.max() < 1e-4, (kind, p.short())


def test_production_capabilities_state_the_interface_contract():
    """Capabilities follow the packages' own validation code (cited in each adapter)."""
    from difftest.execute import adapter as registry

    fa4 = registry.get("fa4").capability
    assert fa4.head_dims_qk == fa4.v_dims == tuple(range(8, 257, 8)) and not fa4.equal_head_dims
    assert set(fa4.layouts) == set(LAYOUTS)
    base = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=40, head_dim_v=248, dtype="bfloat16")
    assert fa4.excludes(base) is None and "head_dim_qk 12" in fa4.excludes(base.replace(head_dim_qk=12))
    # GQA with unequal dims: the interface accepts it and the SM90 backward asserts late, so it
    # stays inside the capability, for a campaign to report as a contract violation
    assert fa4.excludes(base.replace(heads_q=4, heads_kv=2)) is None
    eff = registry.get("sdpa-efficient").capability
    assert "misaligned" not in eff.layouts and "offset" in eff.layouts  # storage_offset * size % 16
    mqa = Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=1, head_dim_qk=16, head_dim_v=16)
    assert eff.excludes(mqa.replace(dtype="float16")) == "GQA/MQA unsupported"
    assert eff.excludes(mqa.replace(dtype="float16", layout="kv_broadcast")) is None  # an MHA call to the kernel
    cudnn = registry.get("sdpa-cudnn").capability
    assert max(cudnn.head_dims_qk) == 128 and all(d % 8 == 0 for d in cudnn.head_dims_qk + cudnn.v_dims)
    flex = registry.get("flex").capability
    assert min(flex.head_dims_qk) == 16 and 17 in flex.head_dims_qk  # flex lowers any dim >= 16
    for name in ("tilelang", "tileops-gqa"):  # interfaces that only take contiguous buffers
        assert registry.get(name).capability.layouts == ("contiguous",)


def test_second_reference_runs_the_same_values_contiguously():
    """A yardstick (FA3 under dew takes contiguous tensors only) judges a laid-out case on
    the logical tensors instead of dropping out of every layout case."""
    from dataclasses import replace as dc_replace

    from difftest.execute import adapter as registry

    class ContiguousOnly(BlockwiseAttention):
        name = "contiguous-yardstick"
        capability = dc_replace(BlockwiseAttention.capability, layouts=("contiguous",))

    registry.register("test-contiguous-yardstick", ContiguousOnly)
    p = DENSE.replace(heads_kv=4, dtype="float16", layout="bhsd")
    case = run_case(BlockwiseAttention(), p, RunConfig(second_reference="test-contiguous-yardstick"))
    assert case.status == "passed", case.render()
    assert not any("cannot run" in n for n in case.notes), case.notes
    assert any(str(v.gate) == "second_reference" for v in case.verdicts)


def test_a_run_states_the_layouts_a_kernel_claims():
    from difftest.judge.declaration import claim_line

    assert "layouts contiguous,do_transposed,bhsd" in claim_line("torch-blockwise", BlockwiseAttention.capability)
    assert "layouts contiguous;" in claim_line("plain", Capability())
