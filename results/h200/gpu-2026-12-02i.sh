#!/usr/bin/env bash
# H200 call I (2026-12-02, session 3): (1) cuDNN FP8 unseeded gpu campaign under the verdicts that model
# Hopper's FP8 accumulator, causal now claimed (use_causal_mask); (2) fla-core parallel_attn gpu campaign
# inside head dims <= 128 (its Hopper backward's shared-memory failure above 128 is a finding), the
# standalone scripts of both fla findings; (3) the accumulator model's alignment rule (fp8_accum_fit2.py);
# (4) correct variants short of 5,000 nightly cases on the host's cores, the GPU hidden.
set -u
T0=$(date +%s)
D=.device/callH
mkdir -p /tmp/site /tmp/fla_site /tmp/o/variants
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
for w in $D/fla/*.whl; do python3 -m zipfile -e $w /tmp/fla_site; done
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)" > $OUT/env.txt
VB=${VB:-450}
run_variant() {  # name copies
  for i in $(seq 1 $2); do
    ( CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout $((VB+60)) python3 -m difftest variants \
        --only $1 --cases 30000 --per-variant-budget $VB --shrink-budget 20 --out-dir /tmp/o/variants/$i \
        > /tmp/o/variants/$1-$i.log 2>&1; echo "variant $1/$i exit $?" >> /tmp/o/exits.txt ) &
  done
}
run_variant sequential-fp32-gemm 5
run_variant sequential-fp32-gemm-one-tile 5
run_variant fp8-tensor-core-accumulator 2
run_variant fp8-current-scaling 1
( timeout 420 python3 -m difftest run -k cudnn-fp8 -p gpu --device cuda --max-examples 3000 --time-budget 330 \
    --shrink-budget 20 --out /tmp/o/cudnn-fp8 --db none -q > /tmp/o/cudnn-fp8.log 2>&1
  echo "cudnn-fp8 exit $?" >> /tmp/o/exits.txt
  timeout 90 python3 results/h200/fp8_accum_fit2.py > /tmp/o/fp8_accum_fit2.log 2>&1
  echo "fit2 exit $?" >> /tmp/o/exits.txt ) &
( export PYTHONPATH=/tmp/fla_site:$PYTHONPATH FLA_TILELANG=0
  timeout 90 python3 results/bugs/fla/repro_fla_hopper_bwd_smem.py > /tmp/o/fla-smem.log 2>&1
  echo "fla smem exit $?" >> /tmp/o/exits.txt
  timeout 90 python3 results/bugs/fla/repro_fla_dsink_tail_rows.py > /tmp/o/fla-dsink.log 2>&1
  echo "fla dsink exit $?" >> /tmp/o/exits.txt
  H=1,3,8,16,20,24,32,40,48,56,64,72,80,88,96,100,104,112,120,127,128
  timeout 400 python3 -m difftest run -k fla-attn -p gpu --device cuda --max-examples 3000 --time-budget 320 \
      --shrink-budget 20 --narrow head_dims_qk=$H --narrow head_dims_v=$H --out /tmp/o/fla-d128 --db none -q \
      > /tmp/o/fla-d128.log 2>&1
  echo "fla-d128 exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt $OUT/env.txt
cat /tmp/o/fp8_accum_fit2.log /tmp/o/fla-smem.log /tmp/o/fla-dsink.log | grep -v Warn | cut -c1-300
for k in cudnn-fp8 fla-d128; do echo "== $k"; tail -24 /tmp/o/$k.log | cut -c1-260; done
python3 -m difftest variants --from-logs /tmp/o/variants/*/*.jsonl | cut -c1-150
cd /tmp/o && tar -cJf $OUT/variants.tar.xz variants; tar -cJf $OUT/callI.tar.xz --exclude=variants --exclude='*/runs/*/cases*' \
  *.log *.txt */runs/*/findings.json */runs/*/repro 2>/dev/null; ls -la $OUT
