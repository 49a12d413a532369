"""scripts/fused_gemm_variants.py, the count behind chunked.FUSED_GEMM_MIN_SCORES: it keys a
chunk's launch of each fused GEMM kernel on what Triton compiles a variant for, read from the
kernels themselves (their flags and the integer arguments they do not mark do_not_specialize),
and a higher threshold never compiles more."""

import sys
from pathlib import Path

from difftest.model.problem import Problem
from difftest.oracles import fused_passes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import fused_gemm_variants as fgv  # noqa: E402

PROBLEMS = [
    Problem(
        seqlen_q=s,
        seqlen_k=s + extra,
        heads_q=4,
        heads_kv=2,
        head_dim_qk=d,
        head_dim_v=d,
        causal=causal,
        window_left=wl,
    ).validate()
    for s, extra, d, causal, wl in (
        (700, 0, 64, True, None),
        (1000, 37, 72, True, None),
        (1500, 0, 128, False, 200),
        (333, 5, 96, False, None),
    )
]


def test_a_variant_is_keyed_on_specialised_arguments_and_flags_only():
    k = fused_passes._scores_exp_kernel
    args = fgv.kernel_args(PROBLEMS[0], 700, 700, 0, 64, 0, 64)[k]
    same = fgv.specialisation(k, {**args, "M": args["M"] + 3, "base": args["base"] + 5})  # do_not_specialize
    assert same == fgv.specialisation(k, args)
    assert fgv.specialisation(k, {**args, "w": 48}) != fgv.specialisation(k, {**args, "w": 47})  # 16 | w or not
    assert fgv.specialisation(k, {**args, "HAS_LEFT": not args["HAS_LEFT"]}) != fgv.specialisation(k, args)
    assert args["HAS_RIGHT"] and not args["HAS_LEFT"]  # a causal chunk's diagonal block


def test_a_higher_threshold_never_compiles_more():
    counts = [fgv.variants(PROBLEMS, 2**t) for t in (0, 14, 18, 40)]
    assert [c[2] for c in counts] == sorted((c[2] for c in counts), reverse=True)
    assert counts[0][2] > counts[2][2] > 0 and counts[-1] == (0, 0, 0)
