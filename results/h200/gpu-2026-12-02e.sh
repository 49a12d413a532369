#!/usr/bin/env bash
# H200 call E (2026-12-02, session 2): the cuDNN FP8 adapter's first run (fp8-smoke.sh), TileOPs
# GQA race stress (`difftest stress`), the cuDNN dense d_qk x d_v sweep (repro_cudnn_sdpa.py
# --sweep) and racecheck/memcheck on the dense candidate with the fixed parsers, an sdpa-efficient
# gpu campaign (report kept: the k re-derivation), and the five slowest correct variants again on
# the host's cores (two processes each).
set -u
T0=$(date +%s)
D=.device/callE
mkdir -p /tmp/site /tmp/tileops_site /tmp/o/variants
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
tar -C /tmp/tileops_site -xJf $D/tileops.tar.xz
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1 DIFFTEST_TILEOPS_SITE=/tmp/tileops_site
echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)" > $OUT/env.txt
VB=${VB:-360}
for v in sequential-fp32-gemm sequential-fp32-gemm-one-tile dq-splitk-atomics rounded-mma-operands lse-log2-stored; do
  for i in 1 2; do
    ( CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout $((VB+90)) python3 -m difftest variants \
        --only $v --cases 30000 --per-variant-budget $VB --shrink-budget 20 --out-dir /tmp/o/variants/$i \
        > /tmp/o/variants/$v-$i.log 2>&1; echo "variant $v/$i exit $?" >> /tmp/o/exits.txt ) &
  done
done
( D=$D META=$D/meta OUT=/tmp/o/fp8 timeout 480 bash results/h200/fp8-smoke.sh > /tmp/o/fp8.log 2>&1
  echo "fp8 exit $?" >> /tmp/o/exits.txt ) &
( timeout 400 python3 -m difftest stress -k tileops-gqa --device cuda --reps 100 --batch 8 --load 1 --head-dim 128 \
    --dtype bfloat16 --out /tmp/o/stress-tileops-gqa > /tmp/o/stress-tileops-gqa.log 2>&1
  echo "stress tileops-gqa exit $?" >> /tmp/o/exits.txt ) &
( timeout 300 python3 -m difftest run -k sdpa-efficient -p gpu --device cuda --max-examples 3000 --time-budget 280 \
    --shrink-budget 20 --out /tmp/o/sdpa-efficient --db none -q > /tmp/o/sdpa-efficient.log 2>&1
  echo "sdpa-efficient exit $?" >> /tmp/o/exits.txt ) &
( timeout 150 python3 results/bugs/cudnn/repro_cudnn_sdpa.py --sweep > /tmp/o/cudnn_sweep.jsonl 2>&1
  echo "cudnn_sweep exit $?" >> /tmp/o/exits.txt
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer | head -1)
  r=results/bugs/cudnn/thd-dqk-gt192-dv-mid.dense-d136-v72.json
  timeout 300 python3 -m difftest sanitize $r --tools racecheck,memcheck --timeout 130 --sanitizer $SAN \
    > /tmp/o/sanitize-dense-d136.log 2>&1; echo "sanitize exit $?" >> /tmp/o/exits.txt
  cp ${r%.json}.sanitizer.json /tmp/o/ ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt; cat /tmp/o/env.txt 2>/dev/null
python3 -c "
import json
for l in open('/tmp/o/cudnn_sweep.jsonl'):
    try: d = json.loads(l)
    except Exception: print(l.strip()[:200]); continue
    if 'case' not in d: print(d); continue
    if 'error' in d: print(d['case'], d['error'][:120]); continue
    print(d['case'], 'o', round(d['o']['max_err'], 4), 'lse', round(d['lse']['max_err'], 4), 'dq', round(d['dq']['max_err'], 4),
          'dk', round(d['dk']['max_err'], 4), 'runs differing dq/o', d.get('dq_runs_differing'), d.get('o_fwd_runs_differing'))"
cat /tmp/o/sanitize-dense-d136.log | tail -8 | cut -c1-300
cat /tmp/o/stress-tileops-gqa.log | tail -12
tail -40 /tmp/o/fp8.log; tail -22 /tmp/o/sdpa-efficient.log
python3 -m difftest variants --from-logs /tmp/o/variants/*/*.jsonl | cut -c1-200
cd /tmp/o && xz -T0 -c sdpa-efficient/report.json > sdpa-efficient.report.json.xz
tar -cJf $OUT/variants.tar.xz variants; tar -cJf $OUT/callE.tar.xz --exclude=variants --exclude='*/runs/*/cases*' \
  *.log *.jsonl *.txt *.xz *.sanitizer.json fp8 stress-tileops-gqa */runs/*/findings.json */runs/*/repro 2>/dev/null; ls -la $OUT
