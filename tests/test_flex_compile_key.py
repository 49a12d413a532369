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
"""

import pytest
import torch

from difftest.kernels.flex import CAPABILITY, COMPILE_KEY, GQA_CAPABILITY, FlexAdapter, compiled_flex
from difftest.model.capability import Capability
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.problem import Problem
from difftest.strategies import problems
from difftest.strategies.compile import compile_keys, key_violations, pinned_fields, warm_problems
from tests.drawing import draw_many

# the key flex declared before it named every guarded field
OLD_KEY = ("dtype", "head_dim_qk", "head_dim_v", "heads_q", "heads_kv")


class Recorder:
    """``flex_attention`` compiled as the adapter compiles it, with a backend that counts
    dynamo's compiles (each new graph is one call of the backend)."""

    def __init__(self):
        torch._dynamo.reset()
        self.compiles = 0
        self.errors = []  # problems whose CPU run raised (their compile still counts)
        self.fn = compiled_flex(backend=self._backend)

    def _backend(self, gm, example_inputs):
        self.compiles += 1
        return gm.forward

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
            except (RuntimeError, IndexError) as e:
                self.errors.append(f"{p.short()}: {e!r}")
        return self.compiles > before


@pytest.fixture(scope="module")
def drawn_events():
    """Drawn problems of both flex adapters, half of them in an already seen configuration,
    each with whether dynamo recompiled for it."""
    rec, out = Recorder(), {}
    for gqa, cap in ((False, CAPABILITY), (True, GQA_CAPABILITY)):
        ps = draw_many(problems(cap, "quick", new_compile_p=0.5, warm_configs=3), 24)
        adapter = FlexAdapter(gqa=gqa)
        out[gqa] = [(p, rec.recompiled(adapter, p)) for p in ps]
    assert len(rec.errors) <= 4, rec.errors  # the few all-empty problems, not the draw
    return out


@pytest.mark.parametrize("gqa", [False, True], ids=["flex", "flex-gqa"])
def test_same_compile_signature_never_recompiles(drawn_events, gqa):
    events = drawn_events[gqa]
    cap = GQA_CAPABILITY if gqa else CAPABILITY
    assert cap.compile_key == COMPILE_KEY
    sigs = [cap.compile_signature(p) for p, _ in events]
    # the draw has teeth: configurations repeat (with other seeds, values, ...) and new ones open
    assert len(set(sigs)) < len(sigs) and sum(r for _, r in events) >= 3
    assert key_violations(events, cap.compile_key) == []


@pytest.mark.parametrize("gqa", [False, True], ids=["flex", "flex-gqa"])
def test_the_old_key_is_caught_missing_fields(drawn_events, gqa):
    """The check above fails on the key flex declared before (OLD_KEY)."""
    assert key_violations(drawn_events[gqa], OLD_KEY)


BASE = Problem(batch=2, seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16)
MASKED = BASE.replace(causal=True)
VARLEN = BASE.replace(seqlen_q=(3, 5), seqlen_k=(4, 4))
# (problem, a change of one key field, the problem it starts from): each must recompile
NEEDED = [
    ("dtype", BASE, dict(dtype="float16")),
    ("batch", BASE, dict(batch=3)),
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
