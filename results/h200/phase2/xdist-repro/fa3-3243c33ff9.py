#!/usr/bin/env python
"""difftest reproducer.

kernel:  fa3
problem: b2 sq[0, 4] sk[3, 4] h32/32 d192/192 float16 sinks@-76.8933 mixed_dox3 pad60
failed:  dsink:nonfinite

Run: python fa3-3243c33ff9.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'fa3'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 2, "causal": false, "dtype": "float16", "head_dim_qk": 192, "head_dim_v": 192, "heads_kv": 32, "heads_q": 32, "pad_tail": 60, "seed": 821, "seqlen_k": [3, 4], "seqlen_q": [0, 4], "sink_center": -76.8932849923042, "sinks": true, "softmax_scale": null, "value_scale": 3.0, "values": "mixed_do", "window_left": null, "window_right": null}')
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
