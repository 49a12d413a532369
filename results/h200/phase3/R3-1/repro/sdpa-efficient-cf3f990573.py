#!/usr/bin/env python
"""difftest reproducer.

kernel:  sdpa-efficient
problem: b1 sq767 sk767 h16/16 d256/256 float16 near_constantx0.75213
failed:  dq:budget

Run: python sdpa-efficient-cf3f990573.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'sdpa-efficient'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 1, "causal": false, "dtype": "float16", "head_dim_qk": 256, "head_dim_v": 256, "heads_kv": 16, "heads_q": 16, "pad_tail": 0, "seed": 1614, "seqlen_k": 767, "seqlen_q": 767, "sink_center": 0.0, "sinks": false, "softmax_scale": null, "value_scale": 0.7521300521924256, "values": "near_constant", "window_left": null, "window_right": null}')
CONFIG = json.loads('{"gates": {"k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}, "floor_ulps": 2.0, "floor_magnitude": 1.0, "standards": {}, "check_nonfinite": true, "second_reference_k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}}, "device": null, "poison": true, "determinism_runs": null, "second_reference": null, "isolate": false, "timeout_s": 300.0, "chunk_threshold": null}')


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
