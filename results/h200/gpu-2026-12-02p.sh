#!/usr/bin/env bash
# H200 call P (2026-12-02, session 4): triage of call J's cuDNN FP8 dK failures (values=negative_lse).
# Call O ran the shrunk problem's bytes with exactly made O/Stats and dK was right; here (1) difftest
# replays the campaign's reproducer through the cudnn-fp8 adapter, and (2) fp8_dq_triage.py runs the same
# bytes the adapter's way (cuDNN's own forward O and Stats, calibration then real scales) without difftest.
set -u
D=.device/callK
mkdir -p /tmp/site && python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONUNBUFFERED=1
J=results/h200/2026-12-02/callJ/cudnn-fp8/runs/bfbec05813fa4bb3abac7736cdfd7149/repro
{ echo "date: $(date -u +%FT%TZ)"
  for f in $J/cudnn-fp8-bfbec05813fa-f2.json $J/cudnn-fp8-bfbec05813fa.json; do
    echo "== difftest repro $f"
    PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta timeout 120 python3 -m difftest repro $f 2>&1 | grep -v Warning | cut -c1-400
    echo "exit ${PIPESTATUS[0]}"
  done
  echo "== fp8_dq_triage.py --inputs"
  PYTHONPATH=/tmp/site timeout 120 python3 results/h200/fp8_dq_triage.py \
      --inputs results/bugs/cudnn/fp8-dk-negative-lse.inputs.pt 2>&1 | grep -v Warning
} > $OUT/dk_triage.log 2>&1
cut -c1-330 $OUT/dk_triage.log | head -90
