"""The structured value kinds: each produces what its name claims (measured), only under
input version 2, with pinned bytes (exact operations only: the same on every device, and
never silently changed), drawn by the strategies within each dtype's limits, and shrunk
toward ``normal``."""

import math

import pytest
import torch
from hypothesis import given, settings

from difftest.kernels.blockwise import CAPABILITY
from difftest.model import counter_rng
from difftest.model import exact_forward as exact_forward_mod
from difftest.model.exact_forward import exact_exp, exact_forward_o
from difftest.model.inputs import make_inputs
from difftest.model.problem import STRUCTURED_KINDS, V2_ONLY_KINDS, VALUE_KINDS, Problem, ProblemError
from difftest.model.structured_values import (
    HEAVY_TAIL_CLIP,
    heavy_tail_dof,
    loss_target,
    low_rank_ranks,
    massive_rows,
    tied_sources,
)
from difftest.oracles.reference import reference
from difftest.search.shrinking import neighbours
from difftest.strategies.values import MAX_SCALE, SCALES, value_settings

BASE = Problem(seqlen_q=64, seqlen_k=64, heads_q=2, heads_kv=2, head_dim_qk=32, head_dim_v=32, seed=5)


def _logits(p, x):
    q = x.q.double()
    k = x.k.double().repeat_interleave(p.group, dim=1)
    return torch.einsum("qhd,khd->hqk", q, k) * p.scale


def _kurtosis(t):
    t = t.double().flatten()
    t = t - t.mean()
    return (t.pow(4).mean() / t.pow(2).mean().pow(2)).item() - 3.0


def test_every_structured_kind_is_version_2_only_and_known_to_the_strategies():
    assert set(STRUCTURED_KINDS) <= set(VALUE_KINDS) and set(STRUCTURED_KINDS) <= set(V2_ONLY_KINDS)
    for kind in STRUCTURED_KINDS:
        assert kind in SCALES
        with pytest.raises(ProblemError, match="needs input_version 2"):
            Problem(values=kind, input_version=1).validate()
        # JSON without input_version (an old reproducer) means version 1: it cannot name them
        with pytest.raises(ProblemError):
            Problem.from_dict({k: v for k, v in Problem(values=kind).to_dict().items() if k != "input_version"})


def test_low_rank_q_and_k_have_the_drawn_rank_plus_small_noise():
    p = BASE.replace(values="low_rank", value_scale=2.0, heads_q=4, heads_kv=4)
    x = make_inputs(p)
    ranks = low_rank_ranks(p).tolist()
    assert set(ranks) <= {1, 2, 3, 4}
    for h, r in enumerate(ranks):
        for t in (x.q, x.k):
            s = torch.linalg.svdvals(t[:, h].double())
            assert s[r:].max() < 0.05 * s[r - 1], (h, r, s[: r + 1])  # rank r, then noise
    # many nearly equal logits: each row of S is a combination of `rank` fixed vectors
    s = torch.linalg.svdvals(_logits(p, x)[0])
    assert s[ranks[0] :].max() < 0.05 * s[0]


def test_qk_correlated_queries_match_keys_of_their_own_token():
    p = BASE.replace(values="qk_correlated", value_scale=4.0, seqlen_q=48)
    x = make_inputs(p)
    s = _logits(p, x)[0]  # [sq, sk]; query i holds the token of key i + 16
    diag = torch.stack([s[i, i + 16] for i in range(48)])
    assert diag.min() > 4.0  # ~2 value_scale for its own token
    assert (s.abs() < 2.0).float().mean() > 0.6  # ~0 for most other tokens
    # repeated tokens: several keys are near copies of each other
    k = x.k[:, 0].double()
    close = (torch.cdist(k, k) < 0.3 * math.sqrt(32)).sum() - 64
    assert close > 64


def test_massive_keys_are_first_tokens_and_value_scale_larger():
    p = BASE.replace(batch=2, values="massive_keys", value_scale=300.0)
    x, base = make_inputs(p), make_inputs(p.replace(values="normal", value_scale=1.0))
    big = massive_rows(p)
    assert big[0] and big[64] and 2 <= int(big.sum()) <= 16
    ratio = x.k.double().norm(dim=-1)[big].mean() / x.k.double().norm(dim=-1)[~big].mean()
    assert 200 < ratio < 400
    assert torch.equal(x.k[~big], base.k[~big]) and torch.equal(x.q, base.q)
    pr = torch.softmax(_logits(p, x)[0], dim=-1)[:, 0]  # the sink dominates or vanishes
    assert ((pr > 0.99) | (pr < 0.01)).float().mean() > 0.9


@pytest.mark.parametrize("scale,kurt", [(1.0, 0.5), (4.0, 5.0)])
def test_heavy_tailed_is_student_t_with_the_degrees_of_freedom_of_its_scale(scale, kurt):
    p = BASE.replace(seqlen_q=256, seqlen_k=256, values="heavy_tailed", value_scale=scale)
    x = make_inputs(p)
    assert heavy_tail_dof(scale) == round(8 / scale)
    for t in (x.q, x.k, x.v):
        assert _kurtosis(t) > kurt
    assert _kurtosis(make_inputs(BASE.replace(seqlen_q=256, seqlen_k=256)).q) < 0.3
    cauchy = make_inputs(p.replace(values="heavy_tailed", value_scale=8.0, dtype="float16"))
    assert cauchy.q.abs().max() <= HEAVY_TAIL_CLIP["float16"] and torch.isfinite(cauchy.q).all()


def test_tied_keys_are_exact_copies_within_their_sequence():
    p = Problem(
        batch=2,
        seqlen_q=(5, 9),
        seqlen_k=(32, 16),
        heads_q=2,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=16,
        pad_tail=3,
        values="tied_keys",
        value_scale=4.0,
        seed=2,
    )
    x = make_inputs(p)
    src = tied_sources(p)
    for v in set(src.tolist()):  # keys that copy the same row are equal, bit for bit
        rows = (src == v).nonzero().flatten()
        assert all(torch.equal(x.k[rows[0]], x.k[r]) for r in rows)
    assert len(set(src[:48].tolist())) < 48 - 16  # plenty of copies
    assert all(0 <= s < 32 for s in src[:32].tolist()) and all(32 <= s < 48 for s in src[32:48].tolist())
    assert len(set(src[:32].tolist())) <= 8 and len(set(src[32:48].tolist())) <= 4
    assert torch.equal(src[48:], torch.arange(48, 51))  # tail rows untouched
    k = make_inputs(Problem(seqlen_q=8, seqlen_k=64, head_dim_qk=16, values="tied_keys", value_scale=1024.0)).k
    assert (k == k[:1]).all()  # every key the same: every logit of a row exactly equal


def test_loss_do_is_o_minus_a_sparse_target():
    p = Problem(
        batch=2,
        seqlen_q=(7, 12),
        seqlen_k=(9, 3),
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=8,
        causal=True,
        sinks=True,
        sink_center=1.0,
        pad_tail=2,
        values="loss_do",
        value_scale=4.0,
        seed=9,
    )
    x = make_inputs(p)
    o = reference(x).o.double()
    t = loss_target(p)
    assert (x.do.double() - (o - t)).abs().max() < 1e-6  # rounded once, to float32
    hot = (t != 0).sum(-1)
    assert set(hot.flatten().tolist()) == {0, 1} and 0.3 < hot.double().mean() < 0.7
    assert t.abs().max() == 4.0
    # the exact-operation forward agrees with the float64 reference to rounding
    assert (exact_forward_o(p, x.q, x.k, x.v, x.sink) - o).abs().max() < 1e-13


def test_exact_exp_matches_exp_to_a_few_ulp_and_flushes_below_minus_700():
    x = -torch.cat([torch.linspace(0, 745, 200001, dtype=torch.float64), torch.tensor([float("inf")])])
    got, want = exact_exp(x), torch.exp(x)
    ok = x > -700
    rel = ((got[ok] - want[ok]).abs() / want[ok]).max().item()
    assert rel < 4 * 2.0**-52, rel
    assert (got[~ok] == 0).all()


@pytest.mark.parametrize("kind", STRUCTURED_KINDS)
def test_structured_kinds_use_no_device_dependent_path(kind, monkeypatch):
    """The generator's torch int64 path (what CUDA runs), here on the CPU, gives the same
    bytes as the numpy path; the operations after it are exact, so a GPU gives them too
    (the gpu-marked test below checks it there)."""
    p = Problem(
        batch=2,
        seqlen_q=(7, 12),
        seqlen_k=(9, 5),
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=8,
        causal=True,
        sinks=True,
        values=kind,
        value_scale=SCALES[kind][0][-1],
        seed=3,
        dtype="bfloat16",
    )
    a = make_inputs(p).digest()
    monkeypatch.setattr(counter_rng, "_use_numpy", lambda device, force: False)
    assert make_inputs(p).digest() == a


PINNED = {  # make_inputs(...).digest() of PIN_PROBLEM per kind: the bytes must never change silently
    "low_rank": "a4da6c158da65d82",
    "qk_correlated": "be60858bc1273e2f",
    "massive_keys": "b39a2584d23f618b",
    "heavy_tailed": "529490c3e77817ad",
    "tied_keys": "fa4bc7542fc291a1",
    "loss_do": "66962cdec70b1d78",
}


def _pin_problem(kind):
    return Problem(
        batch=2,
        seqlen_q=(5, 9),
        seqlen_k=(7, 3),
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=8,
        dtype="float16",
        causal=True,
        sinks=True,
        pad_tail=2,
        values=kind,
        value_scale=SCALES[kind][0][1],
        seed=3,
    )


@pytest.mark.parametrize("kind", STRUCTURED_KINDS)
def test_structured_bytes_are_pinned(kind):
    assert make_inputs(_pin_problem(kind)).digest() == PINNED[kind]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", STRUCTURED_KINDS)
def test_cuda_and_cpu_draw_identical_structured_bytes(kind):
    for dt in ("float16", "bfloat16", "float32"):
        p = Problem(
            batch=2,
            seqlen_q=300,
            seqlen_k=257,
            heads_q=8,
            heads_kv=2,
            head_dim_qk=128,
            head_dim_v=64,
            dtype=dt,
            values=kind,
            value_scale=SCALES[kind][0][-1],
            sinks=True,
            sink_center=-3.0,
            causal=True,
            seed=2**62 + 5,
        )
        assert make_inputs(p, "cuda").digest() == make_inputs(p, "cpu").digest(), (kind, dt)


def test_strategies_draw_every_kind_within_each_dtype_limit():
    seen = {}

    @settings(max_examples=300, database=None, derandomize=True, deadline=None)
    @given(value_settings(CAPABILITY, "float16"))
    def draw(ks):
        kind, scale = ks
        seen.setdefault(kind, []).append(scale)
        top = MAX_SCALE["float16"].get(kind)
        assert top is None or scale <= top

    draw()
    assert set(STRUCTURED_KINDS) <= set(seen)


@pytest.mark.parametrize("kind", STRUCTURED_KINDS)
def test_every_structured_kind_shrinks_toward_normal_and_stays_finite(kind):
    for dt in ("float16", "bfloat16", "float32"):
        ladder = SCALES[kind][0]
        top = MAX_SCALE[dt].get(kind)
        for s in (ladder[0], max(x for x in ladder if top is None or x <= top)):
            p = Problem(
                seqlen_q=33,
                seqlen_k=40,
                heads_q=2,
                heads_kv=1,
                head_dim_qk=64,
                head_dim_v=32,
                dtype=dt,
                values=kind,
                value_scale=s,
                seed=11,
            )
            x = make_inputs(p)
            for n in ("q", "k", "v", "do"):
                assert torch.isfinite(getattr(x, n)).all(), (kind, dt, s, n)
            assert p.replace(values="normal", value_scale=1.0) in list(neighbours(p))


def test_a_long_problem_stays_chunked(monkeypatch):
    """exact_forward_o works through row chunks: no temporary grows past the chunk budget, so a
    long problem never builds the whole score tensor."""
    seen = []
    real = exact_forward_mod._Scratch.get

    def spy(self, name, shape):
        seen.append(math.prod(shape))
        return real(self, name, shape)

    monkeypatch.setattr(exact_forward_mod._Scratch, "get", spy)
    p = Problem(seqlen_q=2048, seqlen_k=2048, head_dim_qk=8, head_dim_v=8, values="loss_do")
    make_inputs(p)
    assert len(seen) > 3 * 4 and max(seen) <= exact_forward_mod.FORWARD_CHUNK["cpu"]
