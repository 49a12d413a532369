#!/usr/bin/env python
"""difftest reproducer.

kernel:  sdpa-flash
problem: b2 sq1473 sk1473 h24/24 d64/64 bfloat16 negative_lsex4
failed:  dq:budget

Run: python sdpa-flash-c47a4b29d7.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'sdpa-flash'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 2, "causal": false, "dtype": "bfloat16", "head_dim_qk": 64, "head_dim_v": 64, "heads_kv": 24, "heads_q": 24, "pad_tail": 0, "seed": 100, "seqlen_k": 1473, "seqlen_q": 1473, "sink_center": 0.0, "sinks": false, "softmax_scale": 0.9290871037265647, "value_scale": 4.0, "values": "negative_lse", "window_left": null, "window_right": null}')
CONFIG = json.loads('{"gates": {"k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}, "floor_ulps": 2.0, "floor_magnitude": 1.0, "standards": {}, "check_nonfinite": true, "second_reference_k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}}, "device": null, "poison": true, "determinism_runs": null, "second_reference": null, "isolate": false, "timeout_s": 600.0, "chunk_threshold": null}')


def main():
    from difftest import adapter
    from difftest.problem import Problem
    from difftest.runner import RunConfig, run_case

    problem = Problem.from_dict(PROBLEM)
    result = run_case(adapter.get(KERNEL), problem, RunConfig.from_dict(CONFIG))
    print(result.render(verbose=True))
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
