#!/usr/bin/env python
"""difftest reproducer.

kernel:  fa4
problem: b8 sq768 sk768 h20/4 d128/128 bfloat16 causal-bottom_right sinks@0 outlier_channelsx128.174
failed:  lse:nonfinite

Run: python fa4-3b4ad7745e.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'fa4'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 8, "causal": true, "dtype": "bfloat16", "head_dim_qk": 128, "head_dim_v": 128, "heads_kv": 4, "heads_q": 20, "pad_tail": 0, "seed": 1123, "seqlen_k": 768, "seqlen_q": 768, "sink_center": 0.0, "sinks": true, "softmax_scale": 9.026970546860309, "value_scale": 128.17431359420237, "values": "outlier_channels", "window_left": null, "window_right": null}')
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
