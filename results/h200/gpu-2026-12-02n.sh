#!/usr/bin/env bash
# H200 call N (2026-12-02, session 4): call L/M's sweep again after a fix to the report script (its O
# was handed over in [B, H, S, D] memory where the graph says BSHD: heads > 1 saw a scrambled O, h = 1
# did not), and each row's dQ error with 4 heads.
set -u
D=.device/callK
mkdir -p /tmp/site && python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
R=results/bugs/cudnn/repro_cudnn_fp8_dq_partial_rows.py
timeout 150 python3 $R > $OUT/sweep.log 2>&1
for a in "33 128 4" "64 128 4"; do timeout 60 python3 $R $a; done > $OUT/rows.log 2>&1
cut -c1-300 $OUT/sweep.log; cut -c1-400 $OUT/rows.log
