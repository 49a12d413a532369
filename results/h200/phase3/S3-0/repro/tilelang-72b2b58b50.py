#!/usr/bin/env python
"""difftest reproducer.

kernel:  tilelang
problem: b5 sq[216, 0, 0, 0, 0] sk[216, 0, 0, 0, 0] h27/27 d64/64 float16 mixed_dox3 pad127
failed:  dq:nonfinite, dk:nonfinite

Run: python tilelang-72b2b58b50.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'tilelang'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 5, "causal": false, "dtype": "float16", "head_dim_qk": 64, "head_dim_v": 64, "heads_kv": 27, "heads_q": 27, "pad_tail": 127, "seed": 934, "seqlen_k": [216, 0, 0, 0, 0], "seqlen_q": [216, 0, 0, 0, 0], "sink_center": 0.0, "sinks": false, "softmax_scale": 8.18540989099881, "value_scale": 3.0, "values": "mixed_do", "window_left": null, "window_right": null}')
CONFIG = json.loads('{"gates": {"k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}, "floor_ulps": 2.0, "floor_magnitude": 1.0, "standards": {}, "check_nonfinite": true, "second_reference_k": {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}}, "device": null, "poison": true, "determinism_runs": null, "second_reference": "fa3", "isolate": false, "timeout_s": 300.0, "chunk_threshold": null}')


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
