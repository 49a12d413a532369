#!/usr/bin/env bash
# H200 call O (2026-12-02, session 4): the cuDNN FP8 dK failures of call J (all values=negative_lse):
# the campaign's shrunk problem with difftest's own FP8 bytes (fp8-dk-negative-lse.inputs.pt, written from
# make_inputs on the CPU), and logits shifted by -18 at seqlen_q 2, 16, 33, 64, 128 (the report script's sweep).
set -u
D=.device/callK
mkdir -p /tmp/site && python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
R=results/bugs/cudnn/repro_cudnn_fp8_dq_partial_rows.py
{ timeout 60 python3 $R --inputs results/bugs/cudnn/fp8-dk-negative-lse.inputs.pt; timeout 200 python3 $R; } > $OUT/neg.log 2>&1
cut -c1-330 $OUT/neg.log
