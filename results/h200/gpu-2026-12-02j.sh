#!/usr/bin/env bash
# H200 call J (2026-12-02, session 3): (1) the cuDNN FP8 dQ/dK findings of call I, with the adapter's
# gradient scales from a first or a second calibration call (fp8_scale_triage.py); (2) the accumulator
# model after the alignment rule of call I (exponent sums) against the H200's FP8 GEMM; (3) a cuDNN FP8
# unseeded gpu campaign under both.
set -u
T0=$(date +%s)
D=.device/callH
mkdir -p /tmp/site /tmp/o
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)" > $OUT/env.txt
timeout 150 python3 results/h200/fp8_scale_triage.py > /tmp/o/fp8_scale_triage.log 2>&1
echo "triage exit $?" >> /tmp/o/exits.txt
timeout 60 python3 -c "
import torch
from difftest.oracles.tensor_core import mma_matmul
g = torch.Generator(device='cuda').manual_seed(7); one = torch.ones((), device='cuda')
for k in (64, 128, 512):
    mag = torch.exp2(torch.randint(-3, 4, (256, k), generator=g, device='cuda').float())
    a8 = (torch.randn(256, k, generator=g, device='cuda') * mag).to(torch.float8_e4m3fn)
    b8 = (torch.randn(256, k, generator=g, device='cuda') * mag).to(torch.float8_e4m3fn)
    hw = torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=True)
    em = mma_matmul(a8.float(), b8.float().t())
    print('product model vs _scaled_mm K', k, 'equal', round((hw == em).float().mean().item(), 4),
          'max|diff|/max|hw|', float((hw - em).abs().max() / hw.abs().max()))
" > /tmp/o/model_check.log 2>&1
timeout 300 python3 -m difftest run -k cudnn-fp8 -p gpu --device cuda --max-examples 3000 --time-budget 200 \
    --shrink-budget 15 --out /tmp/o/cudnn-fp8 --db none -q > /tmp/o/cudnn-fp8.log 2>&1
echo "cudnn-fp8 exit $?" >> /tmp/o/exits.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt $OUT/env.txt /tmp/o/model_check.log; cut -c1-300 /tmp/o/fp8_scale_triage.log | grep -v Warn
tail -28 /tmp/o/cudnn-fp8.log | cut -c1-260
cd /tmp/o && tar -cJf $OUT/callJ.tar.xz --exclude='*/runs/*/cases*' *.log *.txt */runs/*/findings.json */runs/*/repro 2>/dev/null
ls -la $OUT
