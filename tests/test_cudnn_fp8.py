"""The cudnn-fp8 adapter's CPU-side contract: its capability and refusals (cited from the
cudnn-frontend headers), the scales it derives from reported amaxes, its graph cache key, and
its registration; the real calls run on the H200 (results/fp8.md)."""

import pytest

from difftest.execute.adapter import get
from difftest.kernels import cudnn_fp8
from difftest.model import fp8
from difftest.model.problem import Problem

P = dict(head_dim_qk=128, head_dim_v=128, dtype="float8_e4m3fn", seqlen_q=64, seqlen_k=96, heads_q=4, heads_kv=2)


def test_capability_takes_what_hopper_serves():
    cap = cudnn_fp8.CAPABILITY
    assert cap.covers(Problem(**P)) and cap.covers(Problem(**{**P, "dtype": "float8_e5m2"}))
    # causal, top-left (use_causal_mask; run on the H200), either alignment where s_q == s_kv
    assert cap.covers(Problem(**{**P, "causal": True, "align": "top_left"}))
    assert cap.covers(Problem(**{**P, "causal": True, "align": "bottom_right", "seqlen_k": P["seqlen_q"]}))


@pytest.mark.parametrize(
    "change, why",
    [
        ({"head_dim_qk": 64, "head_dim_v": 64}, "head_dim_qk 64"),
        ({"dtype": "float16"}, "dtype float16"),
        ({"causal": True, "align": "bottom_right", "seqlen_q": 64, "seqlen_k": 128}, "Blackwell-only"),
        ({"seqlen_q": 1, "seqlen_k": 64}, "declines s_q == 1"),
        ({"seqlen_q": 1, "seqlen_k": 1}, "s_q == s_kv == 1"),
        ({"batch": 2, "seqlen_q": (3, 5), "seqlen_k": (4, 4)}, "varlen"),
        ({"window_left": 3}, "sliding window"),
    ],
)
def test_capability_refuses_with_the_reason(change, why):
    assert why in cudnn_fp8.CAPABILITY.excludes(Problem(**{**P, **change}))


def test_scales_are_powers_of_two_from_the_reported_amax():
    s = cudnn_fp8.scales_from_amax({"dq": 3.0, "dk": 0.0, "dp": 1e-6}, "float8_e4m3fn")
    assert s["dq"] == 128.0 and s["dk"] == 1.0
    assert 224 < 1e-6 * s["dp"] <= 448 and s["dp"] == fp8.pow2_scale(1e-6, "float8_e4m3fn")


def test_graphs_are_cached_per_configuration_not_per_seed():
    a, b = Problem(**P, seed=1), Problem(**P, seed=2)
    assert cudnn_fp8.graph_key(a) == cudnn_fp8.graph_key(b)
    assert cudnn_fp8.graph_key(a) != cudnn_fp8.graph_key(Problem(**{**P, "causal": True}))


def test_registered_and_says_why_it_cannot_run_here():
    k = get("cudnn-fp8")
    assert k.name == "cudnn-fp8" and k.capability is cudnn_fp8.CAPABILITY
    import torch

    if not torch.cuda.is_available():
        assert k.available()
