"""H200 (2026-12-02, session 3): cuDNN FP8 dQ/dK failures of call I (results/h200/2026-12-02/callI) --
cuDNN, or the adapter's scales? The adapter took dQ/dK/dV's scales from a calibration call that stored
dS (cuDNN's "dP") with scale 1; recalibrate=True measured them again with dS's own scale. Runs every
finding's problem both ways through run_case and prints the verdicts, the amaxes and the scales.
Needs commit f31d095 (the adapter's ``recalibrate``, removed after this run changed no dQ/dK verdict)."""
import json

from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.cudnn_fp8 import CudnnFp8Adapter
from difftest.model.problem import Problem

probs = [Problem.from_dict(d) for d in json.load(open("results/h200/2026-12-02/callI/findings-problems.json"))]
for p in probs:
    for recal in (False, True):
        k = CudnnFp8Adapter()
        k.recalibrate = recal
        r = run_case(k, p, RunConfig(device="cuda"))
        bad = [v.message[:230] for v in r.verdicts if not v.passed]
        worst = {v.output: round(v.numbers.get("ratio", 0), 3) for v in r.verdicts if v.gate == "budget"}
        print(f"{p.short()} | recalibrate={recal} | {r.status.value} | ratios {worst} | amax "
              f"{ {n: float(f'{a:.4g}') for n, a in k.amax.items()} }", flush=True)
        for m in bad:
            print("    ", m, flush=True)
