#!/usr/bin/env python
"""difftest reproducer.

kernel:  sdpa-cudnn
problem: b1 sq3 sk2 h1/1 d32/32 float16 causal-bottom_right
failed:  o:budget, dq:budget, dk:budget, dv:budget

Run: python sdpa-cudnn-b1cc2f72af.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'sdpa-cudnn'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 1, "causal": true, "dtype": "float16", "head_dim_qk": 32, "head_dim_v": 32, "heads_kv": 1, "heads_q": 1, "pad_tail": 0, "seed": 0, "seqlen_k": 2, "seqlen_q": 3, "sink_center": 0.0, "sinks": false, "softmax_scale": null, "value_scale": 1.0, "values": "normal", "window_left": null, "window_right": null}')
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
