#!/usr/bin/env python
"""difftest reproducer.

kernel:  tilelang-det
problem: b6 sq[2, 7, 8, 0, 518, 2] sk[2, 7, 1, 8, 168, 6] h53/1 d64/64 float16 causal-top_left win(519,519)-top_left near_constantx1
failed:  dq:budget, dk:budget

Run: python tilelang-det-f897058d41.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'tilelang-det'
PROBLEM = json.loads('{"align": "top_left", "batch": 6, "causal": true, "dtype": "float16", "head_dim_qk": 64, "head_dim_v": 64, "heads_kv": 1, "heads_q": 53, "pad_tail": 0, "seed": 132790693, "seqlen_k": [2, 7, 1, 8, 168, 6], "seqlen_q": [2, 7, 8, 0, 518, 2], "sink_center": 0.0, "sinks": false, "softmax_scale": null, "value_scale": 1.0, "values": "near_constant", "window_left": 519, "window_right": 519}')
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
