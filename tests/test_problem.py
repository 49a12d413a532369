"""Problem: each invalid field is named with its allowed values; JSON round trip;
key_range and the oracle's allowed_mask follow the documented mask rule."""

import itertools
import json

import pytest

from difftest.model.problem import (
    ALIGNS,
    ALL_DTYPES,
    MAX_HEAD_DIM,
    VALUE_KINDS,
    Problem,
    ProblemError,
    standard_alibi_slopes,
)
from difftest.oracles.reference import allowed_mask

VARLEN = dict(batch=2, seqlen_q=(3, 0), seqlen_k=(0, 5))

# (field, bad value, other fields needed to reach that check, a phrase the allowed part must contain)
INVALID = [
    ("batch", 0, {}, "an int in 1..65536"),
    ("batch", 1.0, {}, "an int in 1..65536"),
    ("batch", True, {}, "an int in 1..65536"),
    ("seqlen_q", 0, {}, "an int in 1..16777216 (dense)"),
    ("seqlen_q", "16", {}, "an int in 1..16777216 (dense)"),
    ("seqlen_q", (3,), dict(batch=2, seqlen_k=(1, 1)), "exactly batch=2 lengths"),
    ("seqlen_q", (3, -1), dict(batch=2, seqlen_k=(1, 1)), "ints in 0..16777216"),
    ("seqlen_k", -4, {}, "an int in 1..16777216 (dense)"),
    ("seqlen_k", (1, 2, 3), dict(batch=2, seqlen_q=(1, 1)), "exactly batch=2 lengths"),
    ("seqlen_k", (2, 2), dict(batch=2, seqlen_q=4), "both ints (dense) or both lists (varlen)"),
    ("seqlen_k", 4, dict(batch=2, seqlen_q=(2, 2)), "both ints (dense) or both lists (varlen)"),
    ("heads_q", 0, {}, "an int in 1..65536"),
    ("heads_kv", 0, {}, "an int in 1..65536"),
    ("heads_kv", 3, dict(heads_q=4), "a divisor of heads_q=4"),
    ("head_dim_qk", 0, {}, f"an int in 1..{MAX_HEAD_DIM}"),
    ("head_dim_qk", MAX_HEAD_DIM + 1, {}, f"an int in 1..{MAX_HEAD_DIM}"),
    ("head_dim_v", 0, {}, f"an int in 1..{MAX_HEAD_DIM}"),
    ("head_dim_v", 32.0, {}, f"an int in 1..{MAX_HEAD_DIM}"),
    ("dtype", "float64", {}, f"one of {ALL_DTYPES}"),
    ("causal", 1, {}, "True or False"),
    ("align", "top-left", {}, f"one of {ALIGNS}"),
    ("window_left", -(2**24) - 1, {}, "None (unbounded) or an int in -16777216..16777216"),
    ("window_right", 2.5, {}, "None (unbounded) or an int in -16777216..16777216"),
    ("sinks", "yes", {}, "True or False"),
    ("sink_center", float("inf"), {}, "a finite float"),
    ("sink_center", True, {}, "a finite float"),
    ("softmax_scale", 0.0, {}, "None (1/sqrt(head_dim_qk)) or a finite float > 0"),
    ("softmax_scale", float("nan"), {}, "None (1/sqrt(head_dim_qk)) or a finite float > 0"),
    ("softmax_scale", True, {}, "None (1/sqrt(head_dim_qk)) or a finite float > 0"),
    ("softcap", -1.0, {}, "None or 0 (off) or a finite float > 0, at most 10000"),
    ("softcap", float("inf"), {}, "None or 0 (off) or a finite float > 0, at most 10000"),
    ("softcap", True, {}, "None or 0 (off) or a finite float > 0, at most 10000"),
    ("softcap", 2.0, dict(dtype="float8_e4m3fn"), "None with an FP8 dtype"),
    ("alibi_slopes", (0.5, 0.25), {}, "None (off) or a list of heads_q=1 finite floats"),
    ("alibi_slopes", (float("nan"),), {}, "None (off) or a list of heads_q=1 finite floats"),
    ("alibi_slopes", (2000.0,), {}, "of magnitude at most 1000"),
    ("alibi_slopes", (True,), {}, "None (off) or a list of heads_q=1 finite floats"),
    ("alibi_slopes", 0.5, {}, "None (off) or a list of heads_q=1 finite floats"),
    ("alibi_slopes", (0.5,), dict(dtype="float8_e4m3fn"), "None with an FP8 dtype"),
    ("rel_bias", ((0.5,), (0.25,)), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", ((0.5, 0.25),), {}, "of the same odd length 2R + 1 <= 33"),
    ("rel_bias", ((0.0,) * 35,), {}, "of the same odd length 2R + 1 <= 33"),
    ("rel_bias", ((),), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", (), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", ((0.5, float("nan"), 0.0),), {}, "finite floats of magnitude at most 1000"),
    ("rel_bias", ((float("inf"),),), {}, "finite floats of magnitude at most 1000"),
    ("rel_bias", ((2000.0,),), {}, "finite floats of magnitude at most 1000"),
    ("rel_bias", ((True,),), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", ("abc",), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", (0.5,), {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", 0.5, {}, "None (off) or heads_q=1 lists"),
    ("rel_bias", ((1.0, 2.0, 3.0), (1.0,)), dict(heads_q=2), "of the same odd length"),
    ("rel_bias", ((0.5,),), dict(dtype="float8_e4m3fn"), "None with an FP8 dtype"),
    ("values", "uniform", {}, f"one of {VALUE_KINDS}"),
    ("value_scale", -1.0, {}, "a finite float > 0"),
    ("value_scale", float("inf"), {}, "a finite float > 0"),
    ("pad_tail", -1, VARLEN, "an int in 0..4096"),
    ("pad_tail", 10**7, VARLEN, "an int in 0..4096"),
    ("pad_tail", 3, {}, "0 unless the problem is varlen"),
    ("seed", -1, {}, "an int in 0..2**63-1"),
    ("seed", 2**63, {}, "an int in 0..2**63-1"),
    ("layout", "bshd_strided", {}, "one of ('contiguous', "),
    ("layout", "kv_broadcast", dict(heads_q=4, heads_kv=2), "only with heads_kv=1 and heads_q >= 2"),
    ("input_version", 3, {}, "one of (1, 2)"),
    ("input_version", True, {}, "one of (1, 2)"),
    ("capture", "acts.safetensors", {}, "an object naming a capture file"),
    ("sparsity", {"kind": "block", "drop": 101}, {}, "drop: an int percentage in 0..100"),
]


@pytest.mark.parametrize("field,bad,others,allowed", INVALID, ids=[f"{f}={b!r}" for f, b, _, _ in INVALID])
def test_each_invalid_field_is_named_with_allowed_values(field, bad, others, allowed):
    with pytest.raises(ProblemError) as info:
        Problem(**{**others, field: bad}).validate()
    err = info.value
    assert err.field == field
    assert err.value == bad or (bad != bad and err.value != err.value)  # nan != nan
    assert allowed in err.allowed
    assert f"Problem.{field}=" in str(err) and allowed in str(err)


def test_every_field_has_an_invalid_case():
    """Adding a field to Problem without a validation case here fails this test."""
    covered = {f for f, *_ in INVALID}
    assert covered == set(Problem.__dataclass_fields__)


def test_valid_problems_validate_and_return_self():
    for p in (
        Problem(),
        Problem(**VARLEN),
        Problem(**VARLEN, pad_tail=4, sinks=True, sink_center=-2.0),
        Problem(
            heads_q=8,
            heads_kv=1,
            causal=True,
            align="top_left",
            window_left=0,
            window_right=0,
            softmax_scale=0.25,
            values="negative_lse",
            value_scale=3.0,
            dtype="bfloat16",
        ),
    ):
        assert p.validate() is p


def test_unknown_field_in_dict_is_named():
    with pytest.raises(ProblemError) as info:
        Problem.from_dict({**Problem().to_dict(), "seqlen": 3})
    assert info.value.field == "seqlen"
    assert "known fields only" in str(info.value)


def test_from_dict_validates():
    with pytest.raises(ProblemError) as info:
        Problem.from_dict({**Problem().to_dict(), "dtype": "int8"})
    assert info.value.field == "dtype"


ROUND_TRIP = [
    Problem(),
    Problem(
        batch=3,
        seqlen_q=(5, 0, 7),
        seqlen_k=(0, 4, 9),
        heads_q=6,
        heads_kv=2,
        head_dim_qk=40,
        head_dim_v=24,
        dtype="float16",
        causal=True,
        align="top_left",
        window_left=3,
        window_right=0,
        sinks=True,
        sink_center=-1.5,
        softmax_scale=0.125,
        values="mixed_do",
        value_scale=2.5,
        pad_tail=5,
        seed=2**62 + 7,
    ),
    Problem(batch=1, seqlen_q=(0,), seqlen_k=(0,), pad_tail=1),
    Problem(input_version=1, seed=9),
    Problem(seqlen_q=5, seqlen_k=9, window_left=-3, window_right=1, softcap=12.5),
    Problem(batch=2, seqlen_q=(3, 5), seqlen_k=(4, 2), heads_q=3, alibi_slopes=(0.1, -2.5, 0.0), align="top_left"),
    Problem(
        heads_q=2, heads_kv=1, causal=True, rel_bias=((0.1, -2.5, 0.0), (1e-6, 999.0, -3.0)), alibi_slopes=(0.5, 0.25)
    ),
]


@pytest.mark.parametrize("p", ROUND_TRIP, ids=lambda p: p.short())
def test_json_round_trip(p):
    s = p.to_json()
    back = Problem.from_json(s)
    assert back == p
    assert hash(back) == hash(p)
    assert type(back.seqlen_q) is type(p.seqlen_q) and type(back.seqlen_k) is type(p.seqlen_k)
    assert back.to_json() == s
    assert json.loads(s)["seqlen_q"] == (list(p.seqlen_q) if p.varlen else p.seqlen_q)


def test_lists_become_tuples():
    p = Problem(batch=2, seqlen_q=[1, 2], seqlen_k=[3, 4]).validate()
    assert p.seqlen_q == (1, 2) and isinstance(p.seqlen_k, tuple)
    assert p.cu_seqlens_q == (0, 1, 3) and p.cu_seqlens_k == (0, 3, 7)


def test_derived_sizes():
    p = Problem(batch=3, seqlen_q=(5, 0, 7), seqlen_k=(0, 4, 9), heads_q=6, heads_kv=2, pad_tail=2)
    assert p.varlen and p.total_q == 14 and p.total_k == 15
    assert p.max_seqlen_q == 7 and p.max_seqlen_k == 9 and p.group == 3
    d = Problem(batch=2, seqlen_q=3, seqlen_k=5, head_dim_qk=16)
    assert not d.varlen and d.seqlens_q == (3, 3) and d.cu_seqlens_k == (0, 5, 10)
    assert d.scale == pytest.approx(0.25)
    assert Problem(softmax_scale=0.3).scale == 0.3


WINDOWS = (None, -4, -1, 0, 1, 3)


def _sees(p: Problem, i: int, j: int, sq: int, sk: int) -> bool:
    """The documented rule, written out apart from Problem.key_bounds (which key_range and
    allowed_mask both read): query i sits at i + (sk - sq) when bottom-right aligned."""
    at = i + (sk - sq if p.align == "bottom_right" else 0)
    return (
        (not p.causal or j <= at)
        and (p.window_right is None or j <= at + p.window_right)
        and (p.window_left is None or j >= at - p.window_left)
    )


def test_key_range_and_allowed_mask_follow_the_documented_rule():
    checked = 0
    for sq, sk, causal, align, wl, wr in itertools.product(
        range(0, 6), range(0, 6), (False, True), ALIGNS, WINDOWS, WINDOWS
    ):
        p = Problem(causal=causal, align=align, window_left=wl, window_right=wr)
        m = allowed_mask(p, sq, sk)
        assert m.shape == (sq, sk)
        for i in range(sq):
            lo, hi = p.key_range(i, sq, sk)
            assert lo <= hi
            want = [_sees(p, i, j, sq, sk) for j in range(sk)]
            assert [lo <= j < hi for j in range(sk)] == want, (p.short(), sq, sk, i, (lo, hi))
            assert m[i].tolist() == want, (p.short(), sq, sk, i)
            assert allowed_mask(p, sq, sk, rows=(i, i + 1))[0].tolist() == want
            checked += 1
    assert checked > 1000


def test_mask_rule_examples():
    """The documented conventions, spelled out: top-left causal (torch is_causal) and
    bottom-right causal (FlashAttention) differ when seqlen_q != seqlen_k."""
    tl = Problem(causal=True, align="top_left")
    br = Problem(causal=True, align="bottom_right")
    assert [tl.key_range(i, 2, 4) for i in range(2)] == [(0, 1), (0, 2)]
    assert [br.key_range(i, 2, 4) for i in range(2)] == [(0, 3), (0, 4)]
    assert [br.key_range(i, 4, 2) for i in range(4)] == [(0, 0), (0, 0), (0, 1), (0, 2)]
    win = Problem(window_left=1, window_right=0, align="top_left")
    assert [win.key_range(i, 3, 3) for i in range(3)] == [(0, 1), (0, 2), (1, 3)]
    assert allowed_mask(br, 4, 2)[:2].any().item() is False  # fully masked rows exist


def test_short_names_the_features():
    p = ROUND_TRIP[1]
    s = p.short()
    for part in (
        "b3",
        "h6/2",
        "d40/24",
        "float16",
        "causal-top_left",
        "win(3,0)",
        "sinks@-1.5",
        "mixed_dox2.5",
        "pad5",
    ):
        assert part in s


def test_json_without_input_version_means_the_old_generator():
    """Reproducers, reports and failure-store lines written before input_version existed
    lack the field: they must replay with the generator that drew their bytes (1), while
    a Problem built in code uses the counter-based one (2) and says so in its JSON."""
    assert Problem().input_version == 2
    assert json.loads(Problem().to_json())["input_version"] == 2
    old = {k: v for k, v in Problem(seed=3).to_dict().items() if k != "input_version"}
    assert Problem.from_dict(old).input_version == 1
    assert "inputs-v1" in Problem.from_dict(old).short() and "inputs-v" not in Problem().short()
    assert Problem.from_dict({**old, "input_version": 2}) == Problem(seed=3)


def test_negative_windows_move_the_edge_past_the_diagonal_and_crossed_bounds_see_nothing():
    """window_left < 0 starts the window right of the diagonal, window_right < 0 ends it left
    of it; left + right < 0 is an empty row set (O 0, LSE -inf), never full attention
    (flash-attn-4 before 4.0.0b30 read it as no window)."""
    right_of = Problem(window_left=-2, window_right=3, align="top_left")
    assert [right_of.key_range(i, 3, 9) for i in range(3)] == [(2, 4), (3, 5), (4, 6)]
    left_of = Problem(window_left=3, window_right=-1, align="top_left")
    assert [left_of.key_range(i, 3, 9) for i in range(3)] == [(0, 0), (0, 1), (0, 2)]
    for crossed in (
        Problem(window_left=-3, window_right=2),
        Problem(window_left=-1, window_right=-1),
        Problem(window_left=-1, causal=True),
        Problem(window_left=2, window_right=-3),
    ):
        assert crossed.empty_window, crossed.short()
        assert not allowed_mask(crossed, 6, 6).any()
        assert all(lo == hi for lo, hi in (crossed.key_range(i, 6, 6) for i in range(6)))
    assert not Problem(window_left=-3, window_right=3).empty_window  # one key: the diagonal + 3
    assert not Problem(window_left=0, causal=True).empty_window and not Problem().empty_window


def test_softcap_zero_is_off_and_absent_from_the_json():
    assert Problem(softcap=0).softcap is None and Problem(softcap=0.0) == Problem()
    assert "softcap" not in Problem().to_dict()
    assert Problem(softcap=30.0).to_dict()["softcap"] == 30.0
    assert "softcap30" in Problem(softcap=30.0).short()


def test_alibi_slopes_are_float32_per_query_head_and_absent_from_old_json():
    """FA2's alibi_slopes is an fp32 tensor: a slope is stored as the float32 a kernel is handed,
    so the truth sees the bias the kernel sees. JSON without the field (every older reproducer)
    is no ALiBi; the bias follows the mask's alignment (bottom-right: FA2's |i + sk - sq - j|)."""
    p = Problem(heads_q=2, alibi_slopes=[0.1, 0.3]).validate()
    assert p.alibi_slopes == (0.10000000149011612, 0.30000001192092896)
    assert Problem.from_json(p.to_json()) == p and p.to_dict()["alibi_slopes"] == list(p.alibi_slopes)
    assert "alibi_slopes" not in Problem().to_dict() and not Problem().alibi
    old = {k: v for k, v in Problem(seed=3).to_dict().items() if k != "alibi_slopes"}
    assert Problem.from_dict(old).alibi_slopes is None
    br = Problem(seqlen_q=3, seqlen_k=5, alibi_slopes=(0.5,))
    assert [br.alibi_bias(0, 0, j, 3, 5) for j in range(5)] == [-1.0, -0.5, 0.0, -0.5, -1.0]
    assert br.replace(align="top_left").alibi_bias(0, 0, 2, 3, 5) == -1.0
    assert (
        "alibi:0.5" in br.short() and "alibi:std" in Problem(heads_q=4, alibi_slopes=standard_alibi_slopes(4)).short()
    )


def test_standard_alibi_slopes_are_the_papers():
    """2^(-8 h / n) for a power of two n; otherwise the power of two below, then every other
    slope of twice that (Press et al.'s get_slopes)."""
    assert standard_alibi_slopes(8) == tuple(2.0**-h for h in range(1, 9))
    assert standard_alibi_slopes(1) == (2.0**-8,)
    assert standard_alibi_slopes(6) == (2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3)


def test_the_relative_position_table_is_float32_per_query_head_and_absent_from_old_json():
    """A table entry is stored as the float32 a kernel is handed; JSON without the field is no
    table; query i and key j read entry clamp(j - (i + offset), -R, R) + R of their head's row, with
    the mask's offset (bottom-right: j - (i + sk - sq)); heads_q changes keep a row per head."""
    p = Problem(heads_q=2, rel_bias=[[0.1, 0.0, 0.3], [1.0, 2.0, 3.0]]).validate()
    assert p.rel_bias == ((0.10000000149011612, 0.0, 0.30000001192092896), (1.0, 2.0, 3.0))
    assert p.rel and p.biased and p.rel_distance == 1
    assert Problem.from_json(p.to_json()) == p and p.to_dict()["rel_bias"] == [list(r) for r in p.rel_bias]
    assert "rel_bias" not in Problem().to_dict() and not Problem().rel and not Problem().biased
    old = {k: v for k, v in Problem(seed=3).to_dict().items() if k != "rel_bias"}
    assert Problem.from_dict(old).rel_bias is None
    br = Problem(seqlen_q=3, seqlen_k=6, rel_bias=((-2.0, -1.0, 0.0, 1.0, 2.0),))
    # query 0's diagonal is key 3: keys 0..5 at distances -3..2, -3 clamped to -2
    assert [br.rel_bias_at(0, 0, j, 3, 6) for j in range(6)] == [-2.0, -2.0, -1.0, 0.0, 1.0, 2.0]
    assert [br.replace(align="top_left").rel_bias_at(0, 0, j, 3, 6) for j in range(6)] == [0.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    assert br.replace(heads_q=3).rel_bias == (br.rel_bias[0],) * 3
    assert "relpos:R2:-2..2" in br.short() and "xH" in p.short()
    with pytest.raises(ProblemError, match="rel_bias"):
        Problem.from_dict({**Problem().to_dict(), "rel_bias": [[0.0] * 101]})
