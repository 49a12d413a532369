"""Adapters translate conventions only where they apply: FlashAttention's +inf LSE for a
row whose softmax is empty becomes difftest's -inf on rows that see no key, and every
other value (a +inf on a row that sees keys: the FA4 sink finding) reaches the gates as
the kernel returned it, where it fails."""

import torch

from difftest import Problem, make_inputs
from difftest.judge.gates import check_outputs
from difftest.kernels.cuda_common import normalize_lse, rows_without_keys
from difftest.oracles.reference import reference

INF = float("inf")


def _fa_convention(lse):
    """What a FlashAttention kernel returns: +inf where difftest has -inf."""
    return torch.where(torch.isneginf(lse), torch.full_like(lse, INF), lse)


def test_rows_without_keys():
    p = Problem(
        batch=3, seqlen_q=(4, 2, 3), seqlen_k=(2, 0, 3), causal=True, align="bottom_right", pad_tail=2
    ).validate()
    # seq 0: offset -2, rows 0-1 see nothing; seq 1: no keys; seq 2: all see keys; 2 tail rows
    assert rows_without_keys(p).tolist() == [True, True, False, False, True, True, False, False, False, True, True]


def test_only_rows_that_see_no_key_are_normalised():
    p = Problem(
        seqlen_q=6, seqlen_k=3, heads_q=2, heads_kv=2, causal=True, align="bottom_right", dtype="float16"
    ).validate()
    x = make_inputs(p)
    truth, good = reference(x, "float64"), reference(x, "float32")
    raw = _fa_convention(good.lse)
    assert torch.isposinf(raw[:3]).all() and torch.isfinite(raw[3:]).all()
    assert torch.equal(normalize_lse(raw, p), good.lse)  # the convention applies: translated
    bad = raw.clone()
    bad[4, 1] = INF  # a row that sees keys: the kernel's +inf must stay
    bad[5, 0] = -INF
    bad[3, 0] = float("nan")
    got = normalize_lse(bad, p)
    assert got[4, 1] == INF and got[5, 0] == -INF and torch.isnan(got[3, 0])
    assert torch.isneginf(got[:3]).all()
    kernel = good.clone()
    kernel.lse = got
    failed = [v for v in check_outputs(p, kernel, truth, reference(x, "same")) if not v.passed]
    assert [v.label for v in failed] == ["lse:nonfinite"]
    assert failed[0].numbers["mismatched"] == 3 and failed[0].worst["token"] == 3


def test_sink_in_the_lse_means_no_row_is_empty():
    p = Problem(seqlen_q=6, seqlen_k=3, causal=True, align="bottom_right", sinks=True).validate()
    raw = torch.full((6, 1), INF)
    assert torch.isposinf(normalize_lse(raw, p)).all()  # a +inf with a sink is the kernel's own value
    # a kernel whose LSE excludes the sink (the adapter adds it) follows FlashAttention's rule
    assert normalize_lse(raw, p, sink_included=False)[:3].isneginf().all()
    assert normalize_lse(raw, p, sink_included=False)[3:].isposinf().all()


def test_lse_layout_is_kept_and_upcast():
    p = Problem(seqlen_q=4, seqlen_k=4, heads_q=3, heads_kv=3).validate()
    raw = torch.randn(4, 3, dtype=torch.float16)
    out = normalize_lse(raw, p)
    assert out.dtype == torch.float32 and torch.equal(out, raw.float())
