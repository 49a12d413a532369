#!/usr/bin/env bash
# Wave 2, stop 10 on nvidia-h200-x2 (two H200s): issue 16 (shards, pytest per-worker GPUs),
# issue 12 (200-case gpu campaigns with their time split; float64 truth next to FA3),
# issue 13 (TileOPs GQA/MHA, seed 004), issue 10 (surveys still short of 200 cases, the
# gpu-profile mutants). Three calls chained while the machine is warm (bundles unpacked in
# /tmp/site stay between calls); every step is bounded so a call ends well inside its limit,
# and a background packer refreshes $OUT/$call-results.tar.xz every 40 s, so a call that runs
# out of time still returns what it had.
#   P1: carry .device/tilelang.tar.xz .device/fa3.tar.xz .seed                     (~520 s)
#       GPU0: TileLang CUDA warm-up, then ONE shard: tilelang-det gpu, 200 examples, unseeded
#       GPU1: seed 004 (tilelang-file: warm its edge shapes, survey 200 with 20-run determinism),
#             flex survey 200 (beside it)
#       then GPU0+GPU1: the same campaign as TWO shards (100 examples each), merged
#   P2: carry .device/tileops.tar.xz .device/fa3.tar.xz                            (~270 s)
#       GPU0: difftest bench --oracle -k fa3 (S = 4k..128k), then bench TileOPs vs FA3
#       GPU1: tileops-gqa and tileops-mha surveys, 200 each + det 20
#   P3: carry .device/fa4.tar.xz .whl                                              (~250 s)
#       GPU0: fa4 gpu campaign, 200 examples (time split)
#       GPU1: fa4-fast survey 200, the standalone bug scripts (FA4, fastflash, SDPA flash)
#       host CPU: difftest mutants -p gpu on the fp16-accumulation / dtype-limit mutants
#   P4: carry .device/tilelang.tar.xz .seed                                         (~330 s)
#       GPU1: seed 004 standalone scripts; GPU0: warm-up, ONE shard (200 examples); then TWO shards
#       side by side; then pytest -m gpu over tests/test_gpu_adapters.py, -n 1 vs -n 2 per-worker GPUs
#   P5: carry .device/tileops.tar.xz .device/fa3.tar.xz                            (~320 s)
#       GPU0: scripts/device/tileops.sh (NaN-dQ reproducer, warm-up, tileops-gqa survey + det 20);
#       GPU1: scripts/device/oracle.sh (truth vs FA3); then pytest -n 2 per-worker GPUs again (GPU ids)
# Wave 2, stop 11 (2026-12-01):
#   Q1: carry .device/tileops.tar.xz .device/fa3.tar.xz                             (~560 s)
#       GPU0: tileops.sh OP=gqa, GPU1: tileops.sh OP=mha (warm-up of the edge corpus and the
#       determinism problems on 14 jobs each, then the survey with 20-run determinism);
#       GPU1 during the warm-ups: difftest bench TileOPs GQA/MHA next to FA3 (one shape)
#   Q2: carry .device/tileops.tar.xz .device/fa3.tar.xz .whl                        (~430 s)
#       GPU1: results/bugs/tileops/repro_tileops_hang.py (Q1's sq64 hang, no difftest), then
#       tileops.sh OP=mha; GPU0: the CPU/GPU input byte identity and CUDA truth tests, the
#       flash-attention-triton survey, tileops.sh OP=gqa (cases bounded at 70 s: Q1 lost 300 s to the hang)
#   Q3: carry .device/fa4.tar.xz                                                    (~420 s)
#       GPU0: results/bugs/fa4/repro_fa4_dv.py (the dV candidate, no difftest), then an fa4 survey
#       narrowed around its known findings (head dims >= 24, equal); GPU1: the byte identity with
#       values=large_do, flex_recompiles.py (the new compile key under Inductor), a flex survey
#   Q4: carry .device/tileops.tar.xz .device/fa3.tar.xz                             (~230 s)
#       GPU0: fa3 survey over its widened contract (every head dim 1..256); GPU1: the TileOPs s64
#       hang script with faulthandler stacks (where it waits), then flex_recompiles.py
# Usage: bash scripts/device/x2.sh P1|P2|P3|P4|P5|Q1..Q4
set -o pipefail
call=${1:?P1..P5, Q1..Q4}
source scripts/device/common.sh
# issue 16: ONE shard of the unseeded tilelang-det gpu campaign on GPU0 (200 examples), after the
# other lanes, TWO shards side by side on GPU0/GPU1 (100 examples each), merged and checked:
#   one_vs_two_shards TIMEOUT1 BUDGET1 TIMEOUT2 BUDGET2 SHRINK
one_vs_two_shards() {
  timed_run one-shard 0 $1 -k tilelang-det -p gpu --max-examples 200 --time-budget $2 --shrink-budget $5 \
    --out $R/one --db none
  lanes_done
  stamp "other lanes done"
  for i in 0 1; do  # threads: cores / 2 each, the --shard default
    timed_run shard$i $i $3 -k tilelang-det -p gpu --max-examples 100 --time-budget $4 --shrink-budget $5 \
      --shard $i/2 --out $R/s$i --db none &
  done
  lanes_done
  python3 -m difftest merge $R/s0/report.json $R/s1/report.json -o $R/merged.json > $L/merge.log 2>&1
  stamp "merge exit $?"
  python3 scripts/device/shard_check.py $R/one/report.json $R/s0/report.json $R/s1/report.json $R/merged.json \
    > $L/shard_check.txt 2>&1; cat $L/shard_check.txt
}
stamp "start $call"
case $call in
P1)
  SEED=$PWD/.seed/seed004_kernel.py
  ( export CUDA_VISIBLE_DEVICES=1 DIFFTEST_TILELANG_FILE=$SEED TILELANG_CACHE_DIR=/tmp/tlc-seed004
    timeout 150 python3 -m difftest.kernels.tilelang_file --warm "$SEED" --jobs 10 > $L/seed004-warm.log 2>&1
    stamp "seed004 warm exit $?"
    timeout 200 $S --out $R --seconds 165 --det-runs 20 tilelang-file 200 > $L/seed004.log 2>&1
    stamp "seed004 survey exit $?" ) &
  ( CUDA_VISIBLE_DEVICES=1 timeout 330 $S --out $R --seconds 290 flex 200 > $L/flex.log 2>&1
    stamp "flex survey exit $?" ) &
  CUDA_VISIBLE_DEVICES=0 timeout 110 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 \
    > $L/tilelang-warm.log 2>&1
  stamp "tilelang warm exit $?"
  one_vs_two_shards 230 200 150 120 20 ;;
P2)
  ( CUDA_VISIBLE_DEVICES=0 timeout 170 python3 -m difftest bench --oracle -k fa3 --json $R/oracle.json \
      --markdown $R/oracle.md > $L/oracle.log 2>&1
    stamp "oracle exit $?"
    CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m difftest bench -k tileops-gqa -k tileops-mha -k fa3 \
      --json $R/bench.json --markdown $R/bench.md > $L/bench.log 2>&1
    stamp "bench exit $?" ) &
  ( CUDA_VISIBLE_DEVICES=1 timeout 260 $S --out $R --seconds 220 --det-runs 20 tileops-gqa 200 > $L/tileops-gqa.log 2>&1
    stamp "tileops-gqa exit $?" ) &
  ( CUDA_VISIBLE_DEVICES=1 timeout 260 $S --out $R --seconds 220 --det-runs 20 tileops-mha 200 > $L/tileops-mha.log 2>&1
    stamp "tileops-mha exit $?" ) &
  lanes_done ;;
P3)
  timed_run fa4 0 240 -k fa4 -p gpu --max-examples 200 --time-budget 200 --shrink-budget 20 --out $R/fa4 --db none &
  ( CUDA_VISIBLE_DEVICES=1 timeout 220 $S --out $R --seconds 185 fa4-fast 200 > $L/fa4-fast.log 2>&1
    stamp "fa4-fast exit $?" ) &
  ( export CUDA_VISIBLE_DEVICES=1
    ( cd results/bugs/fa4 && for c in d8 d64_ok sink_lse; do timeout 60 python3 repro_fa4.py $c 2>&1 | tail -n 4; done )
    timeout 60 python3 results/bugs/fastflash/repro_fastflash_small_hdim.py 2>&1 | tail -n 8
    timeout 60 python3 results/bugs/sdpa-flash/repro_sdpa_flash_dk_inf.py 2>&1 | tail -n 8 ) > $L/standalone.log 2>&1 &
  ( OMP_NUM_THREADS=8 timeout 230 python3 -m difftest mutants --profile gpu --no-grid --per-mutant-budget 60 --shrink-budget 10 \
      --only delta-input-dtype-accumulation dq-cast-before-scale dq-fp16-accumulation \
      --out $R/mutants-gpu.md --out-dir $R/mutants > $L/mutants.log 2>&1
    stamp "mutants exit $?" ) &
  lanes_done ;;
P4)
  # GPU1: the seed 004 standalone scripts (no difftest imported); GPU0: warm-up, then ONE shard
  SEED=$PWD/.seed/seed004_kernel.py
  ( export CUDA_VISIBLE_DEVICES=1
    timeout 75 python3 results/bugs/tilelang-example/repro_tail_keys.py $SEED > $L/repro_tail_keys.log 2>&1
    stamp "repro_tail_keys exit $?"
    timeout 60 python3 results/bugs/tilelang-example/repro_dq_layout_overrun.py $SEED > $L/repro_dq_overrun.log 2>&1
    stamp "repro_dq_overrun exit $?" ) &
  CUDA_VISIBLE_DEVICES=0 timeout 50 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 20 \
    > $L/tilelang-warm.log 2>&1
  stamp "tilelang warm exit $?"
  one_vs_two_shards 110 80 95 55 15
  # pytest over the GPU tests of tests/test_gpu_adapters.py (Flex excluded: a compile per shape),
  # -n 1 on GPU0, then -n 2 with one GPU per worker
  export DIFFTEST_GPU_CAMPAIGN_SECONDS=4
  PT=(-m gpu -q -p no:cacheprovider tests/test_gpu_adapters.py -k "not flex")
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout 65 python3 -m pytest "${PT[@]}" -n 1 --difftest-out $R/pytest-n1 \
    --junitxml $R/pytest-n1.xml > $L/pytest-n1.log 2>&1
  stamp "pytest -n 1 exit $? wall $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  timeout 50 python3 -m pytest "${PT[@]}" -n 2 --difftest-gpu-per-worker --difftest-out $R/pytest-n2 \
    --junitxml $R/pytest-n2.xml > $L/pytest-n2.log 2>&1
  stamp "pytest -n 2 exit $? wall $(( $(date +%s) - t0 )) s" ;;
P5)
  # GPU1: the float64 truth next to FA3 (scripts/device/oracle.sh); GPU0: TileOPs (scripts/device/tileops.sh:
  # the standalone NaN-dQ reproducer, warm-up, survey of tileops-gqa with 20-run determinism)
  ( export CUDA_VISIBLE_DEVICES=1; mkdir -p $R/oracle
    OUT=$R/oracle timeout 130 bash scripts/device/oracle.sh > $L/oracle.log 2>&1; stamp "oracle exit $?" ) &
  BUDGET=255 bash scripts/device/tileops.sh > $L/tileops-call.log 2>&1
  stamp "tileops.sh exit $?"
  lanes_done
  export DIFFTEST_GPU_CAMPAIGN_SECONDS=4
  t0=$(date +%s)
  timeout 45 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_adapters.py -k "not flex" -n 2 \
    --difftest-gpu-per-worker --difftest-out $R/pytest-n2 --junitxml $R/pytest-n2.xml > $L/pytest-n2.log 2>&1
  stamp "pytest -n 2 exit $? wall $(( $(date +%s) - t0 )) s"
  tail -n 12 $L/pytest-n2.log ;;
Q1)
  ( CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m difftest bench -k tileops-gqa -k tileops-mha -k fa3 \
      --shape 2,32,2048,128 --dtype bfloat16 --gqa-kv 8 --json $R/bench.json --markdown $R/bench.md \
      > $L/bench.log 2>&1
    stamp "bench exit $?" ) &
  for op in gqa mha; do
    g=0; [ $op = mha ] && g=1
    ( GPU=$g OP=$op NAME=$call-$op REPRO=0 JOBS=14 WARM_S=150 BUDGET=${BUDGET:-510} \
        bash scripts/device/tileops.sh > $L/tileops-$op.log 2>&1
      stamp "tileops $op exit $?" ) &
  done
  lanes_done ;;
Q2)
  ( CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/tileops_site REPRO_CASE_TIMEOUT_S=150 timeout 170 \
      python3 results/bugs/tileops/repro_tileops_hang.py > $L/repro_hang.jsonl 2> $L/repro_hang.err
    stamp "repro_tileops_hang exit $?" ) &
  ( export CUDA_VISIBLE_DEVICES=0
    timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_counter_rng.py tests/test_oracles.py \
      > $L/gpu-tests.log 2>&1
    stamp "gpu tests (byte identity, CUDA truth) exit $?"
    timeout 250 $S --out $R --seconds 210 --timeout 60 flash-attention-triton 200 > $L/fat.log 2>&1
    stamp "flash-attention-triton survey exit $?" ) &
  for op in gqa mha; do
    g=0; [ $op = mha ] && g=1
    ( GPU=$g OP=$op NAME=$call-$op REPRO=0 JOBS=10 WARM_S=150 BUDGET=${BUDGET:-380} CASE_TIMEOUT=70 \
        bash scripts/device/tileops.sh > $L/tileops-$op.log 2>&1
      stamp "tileops $op exit $?" ) &
  done
  lanes_done ;;
Q3)
  ( export CUDA_VISIBLE_DEVICES=0
    ( cd results/bugs/fa4 && timeout 100 python3 repro_fa4_dv.py ) > $L/repro_fa4_dv.jsonl 2> $L/repro_fa4_dv.err
    stamp "repro_fa4_dv exit $?"
    D="24,32,40,48,56,64,72,80,96,112,128,160,192,224,256"
    timeout 260 $S --out $R --seconds 220 --timeout 90 --narrow head_dims_qk=$D --narrow head_dims_v=$D \
      --narrow equal_head_dims=true fa4 200 > $L/fa4.log 2>&1
    stamp "fa4 survey exit $?" ) &
  ( export CUDA_VISIBLE_DEVICES=1
    timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_counter_rng.py > $L/identity.log 2>&1
    stamp "byte identity exit $?"
    timeout 110 python3 scripts/device/flex_recompiles.py --out $R --kernel flex 40 > $L/flex_recompiles.log 2>&1
    stamp "flex_recompiles exit $?"
    timeout 220 $S --out $R --seconds 190 --edge-seconds 40 --new-compile-p 0.03 --warm-configs 16 --timeout 90 \
      flex 200 > $L/flex.log 2>&1
    stamp "flex survey exit $?" ) &
  lanes_done ;;
Q4)
  ( CUDA_VISIBLE_DEVICES=0 timeout 200 $S --out $R --seconds 170 --timeout 60 fa3 200 > $L/fa3.log 2>&1
    stamp "fa3 survey exit $?" ) &
  ( export CUDA_VISIBLE_DEVICES=1
    PYTHONPATH=/tmp/tileops_site REPRO_CASE_TIMEOUT_S=80 REPRO_CASES=s64_fp16,control_s128_fp16 timeout 95 \
      python3 results/bugs/tileops/repro_tileops_hang.py > $L/repro_hang.jsonl 2> $L/repro_hang.err
    stamp "repro_tileops_hang exit $?"
    timeout 110 python3 scripts/device/flex_recompiles.py --out $R --kernel flex 25 > $L/flex_recompiles.log 2>&1
    stamp "flex_recompiles exit $?" ) &
  lanes_done ;;
*) echo "call: allowed P1 to P5, Q1 to Q4"; exit 2 ;;
esac
finish
