#!/usr/bin/env bash
# H200 call L (2026-12-02, session 4): (1) the cuDNN FP8 dQ class of call K as a standalone report
# script (results/bugs/cudnn/repro_cudnn_fp8_dq_partial_rows.py): which seqlen_q break, which rows and
# columns, GQA / e5m2 / batch / causal, and the smallest problem under compute-sanitizer memcheck;
# (2) more fp8-tensor-core-accumulator nightly cases on the host's cores, the GPU hidden.
set -u
T0=$(date +%s)
D=.device/callK
mkdir -p /tmp/site /tmp/o/variants
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse --short HEAD 2>/dev/null || cat $D/commit)" > $OUT/env.txt
VB=${VB:-330}
NV=${NV:-$(( $(nproc) - 2 ))}
for i in $(seq 1 $NV); do
  ( CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout $((VB+70)) python3 -m difftest variants \
      --only fp8-tensor-core-accumulator --cases 30000 --per-variant-budget $VB --shrink-budget 20 \
      --out-dir /tmp/o/variants/$i > /tmp/o/variants/v-$i.log 2>&1; echo "variant $i exit $?" >> /tmp/o/exits.txt ) &
done
R=results/bugs/cudnn/repro_cudnn_fp8_dq_partial_rows.py
( export PYTHONPATH=/tmp/site
  timeout 200 python3 $R > $OUT/repro_fp8_dq.log 2>&1; echo "repro exit $?" >> /tmp/o/exits.txt
  timeout 200 compute-sanitizer --tool memcheck python3 $R 2 2 > $OUT/repro_fp8_dq.memcheck.log 2>&1
  echo "memcheck exit $?" >> /tmp/o/exits.txt
  timeout 100 compute-sanitizer --tool racecheck python3 $R 2 2 > $OUT/repro_fp8_dq.racecheck.log 2>&1
  echo "racecheck exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt $OUT/env.txt
cut -c1-330 $OUT/repro_fp8_dq.log
tail -8 $OUT/repro_fp8_dq.memcheck.log | cut -c1-300; tail -8 $OUT/repro_fp8_dq.racecheck.log | cut -c1-300
python3 -m difftest variants --from-logs /tmp/o/variants/*/*.jsonl | tail -3 | cut -c1-200
cd /tmp/o && tar -cJf $OUT/variants.tar.xz variants; ls -la $OUT
