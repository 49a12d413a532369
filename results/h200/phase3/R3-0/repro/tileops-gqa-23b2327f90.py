#!/usr/bin/env python
"""difftest reproducer.

kernel:  tileops-gqa
problem: b1 sq1 sk1 h1/1 d128/128 float16
failed:  RuntimeError: RuntimeError: TileOPs: OpNotAvailableError: no implementation serves this call: gqa_dense_prefill (GQADensePrefillFwdKernel: built for architectures [89], device reports 90); gqa_dense (GQADenseWSKernel: does not serve this call); gqa_dense_persistent (GQADensePersistentWSKernel: does not serve this call); gqa_dense_decode (GQADecodeKernel: does not return the log-sum-exp); gqa_dense_decode_bs1 (GQADecodeBs1Kernel: does not return the log-sum-exp); gqa_dense_fp8 (GQADenseFP8Kernel: does not return the log-sum-exp); gqa_dense_fp8_decode (GQADenseFP8DecodeKernel: does not return the log-sum-exp); gqa_dense_decode_long_context (GQADecodeLongContextKernel: does not return the log-sum-exp); gqa_dense_decode_ws (GQADecodeWSKernel: does not return the log-sum-exp); gqa_dense_sliding_window (GQADenseSlidingWindowKernel: does not return the log-sum-exp); gqa_dense_sliding_window_band (GQADenseSlidingWindowBandKernel: does not return the log-sum-exp). Call: arch=90, calibration=h200, sm_count=132, smem_budget=232448, dtype=torch.float16, batch=1, heads=1, heads_kv=1, dim=128, max_seqlen_q=1, seqlen_kv=1, sm_scale=0.08838834764831843, max_position=1, rotary_dim=0, return_lse=True

Run: python tileops-gqa-23b2327f90.py   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = 'tileops-gqa'
PROBLEM = json.loads('{"align": "bottom_right", "batch": 1, "causal": false, "dtype": "float16", "head_dim_qk": 128, "head_dim_v": 128, "heads_kv": 1, "heads_q": 1, "pad_tail": 0, "seed": 0, "seqlen_k": 1, "seqlen_q": 1, "sink_center": 0.0, "sinks": false, "softmax_scale": null, "value_scale": 1.0, "values": "normal", "window_left": null, "window_right": null}')
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
