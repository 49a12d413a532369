"""The drawn bytes of every value kind, pinned: ``make_inputs(p).digest()`` of five
Problems per kind, recorded from the code as it was before the draw was made fast
(commit d7afee0, before results/input-speed.md). A faster draw must give the same bytes,
or reproducers and failure-store entries, which replay from the Problem and its seed
alone, would replay other inputs. The Problems reach the paths a speed-up may take apart:
varlen with empty sequences and a padded tail, GQA and MQA, head dims that are not
powers of two, windows and both alignments, sinks, a softmax scale large enough that
exp underflows to 0, and sizes past the CPU generator's thread split (2^18 values) and
past one row chunk of loss_do's exact forward. Each is drawn through the numpy
generator and through the torch one (what CUDA runs) on the CPU; on a CUDA machine the
``gpu`` test draws them on the device as well."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from difftest.model import counter_rng
from difftest.model.inputs import make_inputs
from difftest.model.problem import VALUE_KINDS, Problem
from difftest.strategies.values import SCALES


def _top(kind: str, dtype: str) -> float:
    """The largest named scale of ``kind`` that fp16 inputs allow (strategies/values.py)."""
    from difftest.strategies.values import clamp_scale

    return clamp_scale(kind, SCALES[kind][0][-1], dtype)


def pin_problems(kind: str) -> list:
    """The five pinned Problems of ``kind``."""
    return [
        # varlen with an empty query and an empty key sequence, a padded tail, GQA 4/2, sinks
        Problem(
            batch=3,
            seqlen_q=(5, 0, 9),
            seqlen_k=(7, 3, 0),
            heads_q=4,
            heads_kv=2,
            head_dim_qk=16,
            head_dim_v=8,
            dtype="float16",
            causal=True,
            sinks=True,
            sink_center=-3.0,
            pad_tail=2,
            values=kind,
            value_scale=_top(kind, "float16"),
            seed=3,
        ),
        # dense, sq != sk, MQA, head dims 72/40 (the tree sums pad to 128/64), top-left window,
        # softmax scale 10 (logits far apart: exp underflows to 0), a sink far above the logits
        Problem(
            batch=2,
            seqlen_q=37,
            seqlen_k=61,
            heads_q=4,
            heads_kv=1,
            head_dim_qk=72,
            head_dim_v=40,
            dtype="bfloat16",
            align="top_left",
            window_left=17,
            sinks=True,
            sink_center=90.0,
            softmax_scale=10.0,
            values=kind,
            value_scale=SCALES[kind][0][0],
            seed=2**40 + 7,
        ),
        # float32, one sequence of 600: 2^18+ values per tensor (the CPU generator's thread split)
        # and several row chunks of loss_do's forward
        Problem(
            seqlen_q=600,
            seqlen_k=600,
            heads_q=4,
            heads_kv=4,
            head_dim_qk=128,
            head_dim_v=128,
            dtype="float32",
            window_right=5,
            values=kind,
            value_scale=_top(kind, "float32") / 3,
            seed=11,
        ),
        # varlen bf16, GQA 6/3, a local window (left 3, right 0), bottom-right with sq > sk (the first
        # 13 queries see no key), a low sink
        Problem(
            batch=2,
            seqlen_q=(33, 1),
            seqlen_k=(20, 50),
            heads_q=6,
            heads_kv=3,
            head_dim_qk=128,
            head_dim_v=64,
            dtype="bfloat16",
            window_left=3,
            window_right=0,
            sinks=True,
            sink_center=-30.0,
            values=kind,
            value_scale=SCALES[kind][0][len(SCALES[kind][0]) // 2],
            seed=987654321,
        ),
        # one key per query (window 0/0, top-left), softmax scale 30, a sink at 90: in rows whose one
        # logit lies 700 below the sink every exp is 0 and O is a sum of signed zeros
        Problem(
            batch=2,
            seqlen_q=48,
            seqlen_k=50,
            heads_q=8,
            heads_kv=2,
            head_dim_qk=72,
            head_dim_v=24,
            dtype="float32",
            align="top_left",
            window_left=0,
            window_right=0,
            sinks=True,
            sink_center=90.0,
            softmax_scale=30.0,
            values=kind,
            value_scale=SCALES[kind][0][0],
            seed=5,
        ),
    ]


PINNED = {  # kind -> the five digests, from commit d7afee0's make_inputs
    "normal": ("0076fcf5ed421409", "23bc6796650d9553", "371d2604172f1aa1", "171d012e4c6b829c", "618ed48275b13304"),
    "scaled": ("dee07248d77fdc5b", "783a0102984d4c5c", "677c5f147b1ee1ac", "bc27940847f8259b", "192476c068031e8b"),
    "near_constant": (
        "e28b91896511077e",
        "e460339db6bb1002",
        "fec8651e2bc2e180",
        "c45910e462222388",
        "7ed675fa3cbb882c",
    ),
    "outlier_channels": (
        "83b0e7f40f767912",
        "5f6d11ff9a883e9b",
        "51e82b8e3c270cc4",
        "1329080178dfd2d5",
        "1d2c31741ee090d4",
    ),
    "negative_lse": (
        "6d8b3f5add0a3d63",
        "82d6ef4a55e28158",
        "41ddeb1e960b5ffc",
        "3a58d609c6bcc94f",
        "26679804d35b7289",
    ),
    "mixed_do": ("e28e5a72ad112609", "5a96c84baeb89994", "fd7a91a461065e8b", "df19cbfeed12d5d2", "3afb1278202e094b"),
    "large_do": ("ea0e7bb458c5e179", "61e7829b556e8c79", "0646151cf1c2b0df", "9c3641d7405004c8", "40ba81684531df6c"),
    "low_rank": ("54b51788d8edf06a", "ec3ad985eaa48a66", "267379f08943c17e", "6bce0c4b1447157b", "91fc38a1f4c2cf50"),
    "qk_correlated": (
        "1398a15d9dcfbf57",
        "41f6c2d14c41112c",
        "eb10cbbaa8d94771",
        "0a2fada7f77c6d76",
        "43684f805e05abcd",
    ),
    "massive_keys": (
        "ec12a337122ee917",
        "3948b20c99e89df4",
        "45b20a967d2f9c1e",
        "b0086ee6c676c900",
        "a571edb5007220a3",
    ),
    "heavy_tailed": (
        "78095d2161a47a9f",
        "fbebf79959952c26",
        "a672220c2835d443",
        "0e222f180103923a",
        "b74baf64143a88ac",
    ),
    "tied_keys": ("8106725908539715", "2428a4fa88eafc3a", "135fcc2519706533", "524ed3e9bf3cacaa", "9688a91273322735"),
    "loss_do": ("76d8111755e10275", "da1062584026519e", "9dc193595dfbaef9", "767247594c211180", "956afed0ca9a6d77"),
}


@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_the_bytes_of_every_value_kind_are_the_ones_drawn_before(kind, monkeypatch):
    want = PINNED[kind]
    got = tuple(make_inputs(p).digest() for p in pin_problems(kind))
    assert got == want, kind
    monkeypatch.setattr(counter_rng, "_use_numpy", lambda device, force: False)  # the path CUDA runs
    assert tuple(make_inputs(p).digest() for p in pin_problems(kind)) == want, kind


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_cuda_draws_the_pinned_bytes(kind):
    assert tuple(make_inputs(p, "cuda").digest() for p in pin_problems(kind)) == PINNED[kind], kind


def large_problem(kind: str) -> Problem:
    """A realistic size (one sequence of 1024, 8 query heads over 2 KV heads, head dim 128,
    causal fp16): the row chunks, thread splits and device chunks of a real campaign."""
    return Problem(
        seqlen_q=1024,
        seqlen_k=1024,
        heads_q=8,
        heads_kv=2,
        head_dim_qk=128,
        head_dim_v=128,
        dtype="float16",
        causal=True,
        values=kind,
        value_scale=_top(kind, "float16"),
        seed=424242,
    )


PINNED_LARGE = {  # kind -> make_inputs(large_problem(kind)).digest(), from commit d7afee0
    "normal": "ed825f24e43c6c33",
    "scaled": "22e7344a33709bf0",
    "near_constant": "bef45e3a3f13b465",
    "outlier_channels": "1da3f77010d90201",
    "negative_lse": "72bf6a8463a37efb",
    "mixed_do": "327045a7167ff08c",
    "large_do": "8385c356eb62bbbf",
    "low_rank": "9437356469ba85a5",
    "qk_correlated": "6be39e83afb2b80f",
    "massive_keys": "93160aa5c029f984",
    "heavy_tailed": "e9ab65cb820166e6",
    "tied_keys": "b118813410ee335b",
    "loss_do": "889079e202fae061",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_the_bytes_of_a_realistic_size_are_the_ones_drawn_before(kind):
    assert make_inputs(large_problem(kind)).digest() == PINNED_LARGE[kind], kind
    if torch.cuda.is_available():
        assert make_inputs(large_problem(kind), "cuda").digest() == PINNED_LARGE[kind], kind


# ---------------------------------------------------------------- loss_do's forward, by definition
# exact_forward_o computes only the keys a row chunk sees and sums again the few exact zeros whose
# sign depends on the rest; the plain definition below sums every key of every row (the whole
# halving sum, zero-padded to a power of two), out of place, one operation at a time, as the code
# of d7afee0 did. The two must agree bit for bit, signs of zeros included.


def _plain_exp(x):
    from difftest.model.exact_forward import _EXP_COEFS, _LN2_HI, _LN2_LO, _LOG2E

    zero = x < -700.0
    x = torch.where(zero, torch.zeros_like(x), x)
    n = torch.floor(x * _LOG2E + 0.5)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    y = torch.full_like(r, _EXP_COEFS[0])
    for c in _EXP_COEFS[1:]:
        y = y * r + c
    two_n = (n.to(torch.int64) + 1023).bitwise_left_shift(52).view(torch.float64)
    return torch.where(zero, torch.zeros_like(y), y * two_n)


def _plain_sum(x, dim):
    x = x.movedim(dim, -1)
    if x.shape[-1] == 0:
        return torch.zeros(x.shape[:-1], dtype=x.dtype)
    x = torch.nn.functional.pad(x, (0, (1 << (x.shape[-1] - 1).bit_length()) - x.shape[-1]))
    while x.shape[-1] > 1:
        x = x[..., : x.shape[-1] // 2] + x[..., x.shape[-1] // 2 :]
    return x[..., 0]


def _plain_forward(p, q, k, v, sink):
    q, k, v = q.double(), k.double(), v.double()
    idx = torch.arange(p.heads_q) // p.group
    o = torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=torch.float64)
    left, right = p.key_bounds()
    for b in range(p.batch):
        q0, sq, k0, sk = p.cu_seqlens_q[b], p.seqlens_q[b], p.cu_seqlens_k[b], p.seqlens_k[b]
        kb, vb = k[k0 : k0 + sk][:, idx], v[k0 : k0 + sk][:, idx]
        s = _plain_sum(q[q0 : q0 + sq].unsqueeze(1) * kb.unsqueeze(0), -1) * p.scale  # [sq, sk, H]
        rel = torch.arange(sk).view(1, -1) - (torch.arange(sq).view(-1, 1) + p.mask_offset(sq, sk))
        ok = torch.ones_like(rel, dtype=torch.bool)
        if left is not None:
            ok &= rel >= -left
        if right is not None:
            ok &= rel < right
        s = s.masked_fill(~ok.unsqueeze(-1), float("-inf"))
        m = s.amax(dim=1) if sk else torch.full((sq, p.heads_q), float("-inf"), dtype=torch.float64)
        if sink is not None:
            m = torch.maximum(m, sink.double().view(1, -1))
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        e = _plain_exp(s - m.unsqueeze(1))
        denom = _plain_sum(e, 1)
        if sink is not None:
            denom = denom + _plain_exp(sink.double().view(1, -1) - m)
        num = _plain_sum(e.unsqueeze(-1) * vb.unsqueeze(0), 1)
        safe = torch.where(denom > 0, denom, torch.ones_like(denom))
        o[q0 : q0 + sq] = torch.where(denom.unsqueeze(-1) > 0, num / safe.unsqueeze(-1), torch.zeros_like(num))
    return o


@st.composite
def _forward_problems(draw):
    b = draw(st.integers(1, 3))
    lens = st.sampled_from([0, 1, 2, 5, 16, 17, 33, 64, 90])
    sq, sk = (
        (tuple(draw(lens) for _ in range(b)), tuple(draw(lens) for _ in range(b)))
        if draw(st.booleans())
        else (draw(st.integers(1, 70)), draw(st.integers(1, 70)))
    )
    hkv = draw(st.integers(1, 3))
    return Problem(
        batch=b,
        seqlen_q=sq,
        seqlen_k=sk,
        heads_q=hkv * draw(st.sampled_from([1, 2, 4])),
        heads_kv=hkv,
        head_dim_qk=draw(st.sampled_from([1, 3, 8, 24, 72])),
        head_dim_v=draw(st.sampled_from([1, 5, 16])),
        dtype=draw(st.sampled_from(["float16", "bfloat16", "float32"])),
        causal=draw(st.booleans()),
        align=draw(st.sampled_from(["top_left", "bottom_right"])),
        window_left=draw(st.sampled_from([None, 0, 1, 5, 40])),
        window_right=draw(st.sampled_from([None, 0, 2, 33])),
        sinks=draw(st.booleans()),
        sink_center=draw(st.sampled_from([0.0, 30.0, 90.0, -90.0])),
        softmax_scale=draw(st.sampled_from([None, 0.01, 10.0, 60.0])),
        seed=draw(st.integers(0, 2**40)),
    )


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(_forward_problems(), st.sampled_from([64, 3000, 1 << 21]))
@pytest.mark.slow
def test_loss_do_forward_is_the_plain_halving_sum_bit_for_bit(p, chunk):
    """Small chunk budgets too: many row and head chunks, blocks of every alignment."""
    from difftest.model import exact_forward

    x = make_inputs(p)
    old = exact_forward.FORWARD_CHUNK["cpu"]
    exact_forward.FORWARD_CHUNK["cpu"] = chunk
    try:
        got = exact_forward.exact_forward_o(p, x.q, x.k, x.v, x.sink)
    finally:
        exact_forward.FORWARD_CHUNK["cpu"] = old
    want = _plain_forward(p, x.q, x.k, x.v, x.sink)
    assert torch.equal(got.view(torch.int64), want.view(torch.int64))
