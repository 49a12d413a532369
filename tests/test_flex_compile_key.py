"""The flex adapters' compile key against what dynamo actually recompiles.

On CUDA the adapter runs ``torch.compile(flex_attention, dynamic=False)`` and every guard
failure is a new Inductor/Triton build (~2.6 s each on the H200). ``Capability.compile_key``
must name every Problem field whose change fails a guard, or the compile-aware strategies
(strategies/compile.py) draw "warm" problems that recompile anyway (a 290 s
survey on the H200 never reached a drawn case). The CPU cannot lower flex to Triton, but dynamo's guards
are decided before any backend runs: the adapter's own call (``compiled_flex``, the same
``torch.compile`` options) with a counting backend on CPU tensors recompiles exactly when a
guard fails. FlexAttention refuses a CPU backward, so this traces the forward
(``translate(grad=False)``); the CUDA call differs only by requires_grad, the same for every
case.

``flex-dynamic`` (kernels/flex_dynamic.py) compiles with ``dynamic=True`` and hands the
per-problem constants over as tensors; its key is checked the same way, through its own
``compiled_flex_dynamic``, and its constants are shown never to recompile.
"""

import pytest
import torch

from difftest.kernels.flex import CAPABILITY, COMPILE_KEY, GQA_CAPABILITY, FlexAdapter, compiled_flex
from difftest.kernels.flex_dynamic import (
    DYNAMIC_CAPABILITY,
    DYNAMIC_GQA_CAPABILITY,
    FlexDynamicAdapter,
    compiled_flex_dynamic,
)
from difftest.model.capability import Capability
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.problem import Problem
from difftest.strategies import problems
from difftest.strategies.compile import compile_keys, key_violations, pinned_fields, warm_problems
from tests.drawing import draw_many

# Every test here compiles FlexAttention on the CPU (~125 s in all on the 2-core CI box, 2026-12-07): the
# slow tier (python3 -m pytest -n 2 -m slow; the README says when it runs).
pytestmark = pytest.mark.slow

# the key flex declared before it named every guarded field
OLD_KEY = ("dtype", "head_dim_qk", "head_dim_v", "heads_q", "heads_kv")


class NotRun(Exception):
    """A Recorder that does not run its graphs stops each call here, after dynamo decided."""


class Recorder:
    """``flex_attention`` compiled as the adapter compiles it (``compile``: flex's
    ``compiled_flex`` or flex-dynamic's ``compiled_flex_dynamic``), with a backend that counts
    dynamo's compiles (each new graph is one call of the backend)."""

    def __init__(self, compile=compiled_flex, run: bool = True):
        torch._dynamo.reset()
        self.compiles = 0
        self.errors = []  # problems whose CPU run raised (their compile still counts)
        self.run = run  # False: count the compile, never run the graph (gpu-sized problems)
        self.fn = compile(backend=self._backend)

    def _backend(self, gm, example_inputs):
        self.compiles += 1
        if self.run:
            return gm.forward

        def not_run(*args):
            raise NotRun

        return not_run

    def recompiled(self, adapter: FlexAdapter, p: Problem) -> bool:
        """Run ``p`` through the adapter's translation; whether dynamo compiled for it. CPU
        flex may fail to run a compiled graph (an all-empty varlen problem: "max(): Expected
        reduction dim 3 to have non-zero size"); the compile, decided before, still counts."""
        before = self.compiles
        with torch._dynamo.config.patch(
            fail_on_recompile_limit_hit=True, recompile_limit=10_000, accumulated_recompile_limit=10_000
        ):
            try:
                adapter.translate(lay_out(make_inputs(p)), grad=False, flex_fn=self.fn)
            except NotRun:
                pass
            except (RuntimeError, IndexError) as e:
                self.errors.append(f"{p.short()}: {e!r}")
        return self.compiles > before


# name -> (adapter, capability, the adapter's compile call)
ADAPTERS = {
    "flex": (FlexAdapter(), CAPABILITY, compiled_flex),
    "flex-gqa": (FlexAdapter(gqa=True), GQA_CAPABILITY, compiled_flex),
    "flex-dynamic": (FlexDynamicAdapter(), DYNAMIC_CAPABILITY, compiled_flex_dynamic),
    "flex-dynamic-gqa": (FlexDynamicAdapter(gqa=True), DYNAMIC_GQA_CAPABILITY, compiled_flex_dynamic),
}


@pytest.fixture(scope="module")
def drawn_events():
    """Drawn problems of each flex adapter, half of them in an already seen configuration,
    each with whether dynamo recompiled for it (one recorder per compile call)."""
    recs = {compile: Recorder(compile) for compile in (compiled_flex, compiled_flex_dynamic)}
    out = {}
    # 18 draws an adapter (24 before): configurations still repeat and open, and flex's old
    # key is still caught on both flex adapters (at 12 it escaped on flex-gqa); every key
    # field is checked one by one in test_each_key_field_is_a_recompile_and_the_rest_are_not
    for name, (adapter, cap, compile) in ADAPTERS.items():
        ps = draw_many(problems(cap, "quick", new_compile_p=0.5, warm_configs=3), 18)
        out[name] = [(p, recs[compile].recompiled(adapter, p)) for p in ps]
    for rec in recs.values():
        assert len(rec.errors) <= 4, rec.errors  # the few all-empty problems, not the draw
    return out


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_same_compile_signature_never_recompiles(drawn_events, name):
    events = drawn_events[name]
    cap = ADAPTERS[name][1]
    assert cap.compile_key == (COMPILE_KEY if name in ("flex", "flex-gqa") else DYNAMIC_CAPABILITY.compile_key)
    sigs = [cap.compile_signature(p) for p, _ in events]
    # the draw has teeth: configurations repeat (with other seeds, values, ...) and new ones open
    assert len(set(sigs)) < len(sigs) and sum(r for _, r in events) >= 3
    assert key_violations(events, cap.compile_key) == []


@pytest.mark.parametrize("name", ["flex", "flex-gqa"])
def test_the_old_key_is_caught_missing_fields(drawn_events, name):
    """The check above fails on the key flex declared before (OLD_KEY)."""
    assert key_violations(drawn_events[name], OLD_KEY)


BASE = Problem(batch=2, seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16)
MASKED = BASE.replace(causal=True)
VARLEN = BASE.replace(seqlen_q=(3, 5), seqlen_k=(4, 4))
# (problem, a change of one key field, the problem it starts from): each must recompile
NEEDED = [
    ("dtype", BASE, dict(dtype="float16")),
    ("seqlen_q", BASE, dict(seqlen_q=9)),
    ("seqlen_k", BASE, dict(seqlen_k=9)),
    ("pad_tail", VARLEN, dict(pad_tail=1)),
    ("heads", BASE, dict(heads_q=4, heads_kv=4)),
    ("head_dim_qk", BASE, dict(head_dim_qk=32)),
    ("head_dim_v", BASE, dict(head_dim_v=32)),
    ("softmax_scale", BASE, dict(softmax_scale=0.3)),
    ("causal", BASE, dict(causal=True)),
    ("align", MASKED, dict(align="top_left")),
    ("window_left value", BASE.replace(window_left=2), dict(window_left=3)),
    ("window_right value", BASE.replace(window_right=1), dict(window_right=2)),
    ("sinks", BASE, dict(sinks=True)),
    ("softcap", BASE, dict(softcap=30.0)),
    ("softcap value", BASE.replace(softcap=30.0), dict(softcap=2.5)),
    ("negative window_left", BASE.replace(window_left=2, window_right=4), dict(window_left=-2)),
    ("layout bhsd", BASE, dict(layout="bhsd")),
    ("layout dim_slice", BASE, dict(layout="dim_slice")),
]
# changes outside the key: tensor contents only, never a recompile
FREE = [
    ("seed", MASKED, dict(seed=7)),
    ("values", MASKED, dict(values="scaled", value_scale=4.0)),
    ("sink_center", MASKED.replace(sinks=True), dict(sink_center=3.0)),
]


@pytest.mark.parametrize("name,p,change", NEEDED + FREE, ids=[n for n, _, _ in NEEDED + FREE])
def test_each_key_field_is_a_recompile_and_the_rest_are_not(name, p, change):
    rec, adapter = Recorder(), FlexAdapter()
    q = p.replace(**change).validate()
    assert rec.recompiled(adapter, p)
    assert not rec.recompiled(adapter, p)  # the same problem again reuses the graph
    recompiled = rec.recompiled(adapter, q)
    differs = CAPABILITY.compile_signature(q) != CAPABILITY.compile_signature(p)
    assert recompiled == differs, (name, recompiled, differs)
    assert recompiled == ((name, p, change) in NEEDED)


# flex-dynamic: flex's keyed constants are tensors now, so their changes (presence included)
# never recompile; what still does (below) is inside its key
DYNAMIC_FREE = [
    ("softmax_scale", BASE, dict(softmax_scale=0.3)),
    ("causal", BASE, dict(causal=True)),
    ("align", MASKED, dict(align="top_left")),
    ("window", MASKED, dict(causal=False, window_left=2, window_right=1)),
    ("window_left value", BASE.replace(window_left=2), dict(window_left=3)),
    ("window_right value", BASE.replace(window_right=1), dict(window_right=2)),
    ("negative window_left", BASE.replace(window_left=2, window_right=4), dict(window_left=-2)),
    ("softcap", BASE, dict(softcap=30.0)),
    ("softcap value", BASE.replace(softcap=30.0), dict(softcap=2.5)),
    ("varlen lengths, same totals", VARLEN, dict(seqlen_q=(5, 3), seqlen_k=(2, 6))),
    *FREE,
]
DYNAMIC_NEEDED = [
    ("dtype", BASE, dict(dtype="float16")),
    ("dense batch of one", BASE, dict(batch=1)),
    ("heads", BASE, dict(heads_q=4, heads_kv=4)),
    ("head_dim_qk", BASE, dict(head_dim_qk=32)),
    ("head_dim_v", BASE, dict(head_dim_v=32)),
    ("sinks", BASE, dict(sinks=True)),
    ("layout bhsd", BASE, dict(layout="bhsd")),
]


@pytest.mark.parametrize(
    "name,p,change", DYNAMIC_NEEDED + DYNAMIC_FREE, ids=[n for n, _, _ in DYNAMIC_NEEDED + DYNAMIC_FREE]
)
def test_flex_dynamic_recompiles_for_shapes_it_keys_and_never_for_its_constants(name, p, change):
    rec, adapter = Recorder(compiled_flex_dynamic), FlexDynamicAdapter()
    q = p.replace(**change).validate()
    assert rec.recompiled(adapter, p)
    assert not rec.recompiled(adapter, p)
    recompiled = rec.recompiled(adapter, q)
    assert recompiled == ((name, p, change) in DYNAMIC_NEEDED), name
    if recompiled:  # the key may be conservative (batch 2 -> 3 is a new signature), never short
        assert DYNAMIC_CAPABILITY.compile_signature(q) != DYNAMIC_CAPABILITY.compile_signature(p)


@pytest.mark.parametrize(
    "sizes",
    [
        [dict(seqlen_q=200, seqlen_k=300), dict(seqlen_q=260, seqlen_k=150), dict(seqlen_q=130, seqlen_k=140)]
        + [dict(seqlen_q=129, seqlen_k=999), dict(seqlen_q=400, seqlen_k=1000), dict(seqlen_q=300, seqlen_k=300)],
        [dict(batch=2), dict(batch=3), dict(batch=4), dict(batch=2)],
    ],
    ids=["seqlen", "batch"],
)
def test_flex_dynamic_sizes_recompile_once_then_never(sizes):
    """Lengths and batch are symbolic, but the block mask's sizes (block counts, its batch)
    enter static at the first compile: the first change recompiles once (dynamo's automatic
    dynamic then makes them symbolic), later sizes never. A dense batch of one, one block (a
    length up to 128) and a length of one are specialised too, so these fields stay in the key."""
    rec, adapter = Recorder(compiled_flex_dynamic), FlexDynamicAdapter()
    got = [rec.recompiled(adapter, BASE.replace(**change).validate()) for change in sizes]
    assert got == [True, True] + [False] * (len(sizes) - 2)


def test_flex_dynamic_compiles_less_than_flex_for_the_same_draws():
    """The same fresh draws (no compile-aware reuse) through both compile calls: flex-dynamic
    compiles far fewer graphs (the gpu-profile figures: ``slow`` test below)."""
    # 18 fresh draws (30 before, ~45 s on a CI core): flex 16 and flex-dynamic 14 compiles,
    # the same margin as at 30 (26 and 24); new_compile_p=1.0 opens a configuration per draw
    ps = draw_many(problems(CAPABILITY, "quick", new_compile_p=1.0), 18)
    counts = {}
    for name in ("flex", "flex-dynamic"):
        adapter, _, compile = ADAPTERS[name]
        rec = Recorder(compile)
        for p in ps:
            rec.recompiled(adapter, p)
        counts[name] = rec.compiles
    print(f"\n{len(ps)} quick draws: {counts}")
    assert counts["flex-dynamic"] < counts["flex"], counts


@pytest.mark.slow
def test_gpu_draws_compile_counts():
    """The figures a GPU campaign pays in Inductor/Triton builds (~2.6 s each): dynamo's compiles
    for 200 gpu-profile draws, fresh ones (the same problems for both) and each adapter's own
    compile-aware draws (the campaign's default). Graphs are not run (gpu sizes on the CPU).
    Measured on torch 2.13 (CPU): fresh, flex 154 and flex-dynamic 122 (most fresh draws change
    the dtype, heads or a head dim, static under both); compile-aware, flex 60 and flex-dynamic 15
    (its warm draws vary scale, masks and softcap, 73 settings against flex's 19, over 18 shape
    configurations against 55: its key still pins the shapes)."""
    n, counts = 200, {}
    fresh = draw_many(problems(CAPABILITY, "gpu", new_compile_p=1.0), n)
    for name in ("flex", "flex-dynamic"):
        adapter, cap, compile = ADAPTERS[name]
        for mode, ps in (("fresh", fresh), ("compile-aware", draw_many(problems(cap, "gpu"), n))):
            rec = Recorder(compile, run=False)
            events = [(p, rec.recompiled(adapter, p)) for p in ps]
            assert key_violations(events, cap.compile_key) == []
            counts[name, mode] = rec.compiles
    print(f"\n{n} gpu draws, dynamo compiles: {counts}")
    for mode in ("fresh", "compile-aware"):
        assert counts["flex-dynamic", mode] < counts["flex", mode]


def test_compile_aware_draws_reuse_flex_configurations():
    """A flex campaign's draws (the gpu profile, the default new_compile_p) mostly fall in
    configurations the edge corpus compiled first; with new_compile_p=0 all of them do."""
    n = 300
    for cap in (CAPABILITY, GQA_CAPABILITY):
        warm = {cap.compile_signature(w) for w in warm_problems(cap, "gpu", 4)}
        never = draw_many(problems(cap, "gpu", new_compile_p=0.0, warm_configs=4), n)
        assert {cap.compile_signature(p) for p in never} <= warm
        assert len({(p.values, p.seed) for p in never}) > n // 2  # what the key leaves free still varies
        ps = draw_many(problems(cap, "gpu", new_compile_p=0.1, warm_configs=4), n)
        keys = compile_keys(ps, cap)
        print(
            f"\n{n} gpu draws: {len(keys)} compile configurations, warm share "
            f"{sum(cap.compile_signature(p) in warm for p in ps) / n:.2f}"
        )
        assert len(keys) < n / 2
        for p in never + ps:
            assert cap.excludes(p) is None


def test_a_pinned_layout_keeps_its_heads():
    """A key with ``layout`` pins it (strategies/problems.py) and the heads it was drawn with
    (strategies/compile.py DEPENDS), so a warm kv_broadcast (heads_kv=1) stays legal."""
    from difftest.model.profiles import get_profile
    from difftest.strategies.problems import _problems

    assert {"heads_q", "heads_kv", "layout"} <= set(pinned_fields(("layout",)))
    cap = Capability(dtypes=("float32",), head_dims_qk=(16,), gqa=True, layouts=LAYOUTS, compile_key=("layout",))
    warm = [w for w in warm_problems(cap, "ci", None) if w.layout.kind == "kv_broadcast"]
    ps = draw_many(_problems(cap, get_profile("ci"), warm, 0.0), 60)
    assert {cap.compile_signature(p) for p in ps} == {cap.compile_signature(warm[0])}
    assert {(p.heads_q, p.heads_kv) for p in ps} == {(warm[0].heads_q, warm[0].heads_kv)}
    assert len({(p.seqlen_q, p.values) for p in ps}) > 10  # fields outside the key still vary
    for p in ps:
        assert cap.excludes(p) is None


def test_key_violations_names_the_changed_fields():
    events = [(BASE, True), (BASE.replace(window_left=3), True)]
    bad = key_violations(events, ("dtype",))
    assert len(bad) == 1 and "window_left" in bad[0]
    assert key_violations(events, ("dtype", "window_left")) == []
