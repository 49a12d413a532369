#!/usr/bin/env bash
# Wave 2, stop 12 (2026-12-01) on ONE H200 (kind nvidia-h200): every lane shares GPU 0, each
# bounded so the call ends inside its 600 s limit (common.sh packs results every 40 s).
#   R1: carry .device/tileops.tar.xz .device/fa3.tar.xz .whl                        (~540 s)
#       issue 13: tileops.sh OP=gqa and OP=mha side by side (warm-up on 6 jobs each, survey with
#       20-run determinism, cases bounded at 90 s: the s64 hang costs 90 s, a build 11-41 s);
#       beside them the flash-attention-triton survey (Q2 left it at 166 cases, 200 asked)
#   R2: carry .device/tileops.tar.xz                                                 (~440 s)
#       issue 13 / 10.3: results/bugs/tileops/repro_tileops_head_dims.py (no difftest: which multiples
#       of 16 in 16..288 the forward and backward serve; R1 met a late refusal at d288) beside
#       tileops-gqa (20-run determinism FIRST, then the survey) and tileops-mha surveys, no warm-up,
#       d288 narrowed away (the known late refusal), cases bounded at 150 s (builds on a loaded host)
#   R3: carry .device/tilelang.tar.xz                                                (~450 s)
#       issue 12: scripts/device/overhead.sh ALONE (the 200-case tilelang-det gpu campaign's time
#       split after the CPU-side changes, next to phase 5's P1); then, side by side, issue 10.2:
#       `difftest mutants -p gpu --device cuda` (the blockwise tile-growth and dtype-limit mutants
#       run on the GPU; the TileLang mutants are CUDA builds) and tilelang-det on values=large_do
#   R4: carry .device/fa4.tar.xz                                                     (~320 s)
#       issue 12: the fa4 gpu campaign, 200 examples, narrowed around FA4's known findings (head dims
#       8/16/48/72/80 wrong, 104 refused late, GQA with unequal dims refused, sink LSE +inf), its time
#       split; beside it issue 10.2: the blockwise tile-growth, dtype-limit, partial-tile and layout-cache
#       mutants with --device cuda (R3 found the blockwise kernel made CPU masks; fixed)
#   R5: carry .device/fa3jax (the flash-attn3-jax 0.2.3 cp312 wheel and einops, its one        (~500 s)
#       dependency the device may lack), issue 13.3: both installed into /tmp/site, then side by
#       side scripts/device/fa3jax_smoke.py (no difftest: import under the device's JAX, public
#       forward+backward vs float64 torch at b1 s128 h2/1 d128 bf16 causal, plus d64, d192, s100 and
#       varlen probes; R/fa3jax-smoke.jsonl) and the fa3-jax survey, 200 cases, 20-run determinism
#   R6: carry .device/fa4.tar.xz                                                     (~120 s)
#       the FA4 findings still without a standalone run, each script made by scripts/bug_report.py
#       from difftest's own inputs (no difftest imported): head dim 40 dQ (varlen, window),
#       head dim 112 build failure (offset layout; the script passes contiguous tensors), the sink
#       LSE +inf (phase 4's d24 and phase 6's d24 reproducers)
#   R7: carry .device/fa3jax .device/tileops.tar.xz                                  (~520 s)
#       issue 13: results/bugs/fa3-jax/repro_fa3jax_bwd_scratch_overflow.py (no difftest: R5's smoke
#       found dQ/dK/dV ~100x wrong at s100 unmasked; the sweep over seqlens, twice, then
#       compute-sanitizer memcheck with XLA's platform allocator at s100 and the s80 control);
#       beside it the TileOPs gqa/mha surveys topped up (R1's settings, head dims 16..144: the
#       forward refuses 160+ at launch, already reported)
#   R8: carry .device/fa4.tar.xz                                                     (~520 s)
#       R6's standalone FA4 scripts first, then issue 12.2: the fa4 gpu campaign, 200 examples,
#       narrowed around every FA4 finding so far (R4 stopped at its first, d40, after 80 cases;
#       d112 offset is a build failure), alone on the machine, for its time split
#   R9: carry .device/fa3jax .device/tileops.tar.xz                                  (~260 s)
#       issue 13 / detection: the fa3-jax adapter's two paths (public jax.vjp, the rules on the
#       forward's residuals) surveyed side by side, one seed, narrowed to the overflow's class
#       (dense, unmasked, seqlen <= 400); beside them scripts/device/build_vs_hang.py (issue 10)
#   R10: carry .device/fa3jax .device/tileops.tar.xz                                 (~260 s)
#       after 34ad9c6 (an adapter's process start is set-up time): build_vs_hang.py again (R9's
#       build case was a false "hang"); beside it the final fa3-jax adapter (public jax.vjp path,
#       the corpus with every head dim) surveyed over its whole capability, 200 cases
#   R11: carry .device/fa3jax                                                        (~90 s)
#       after 2395c24 (every differing rerun judged): the fa3-jax 20-run determinism rows again;
#       R5's b2 sq333 h8/2 row differed by +inf and passed as informational
#   R12: carry .device/fa3jax                                                        (~170 s)
#       after d13a8f6 (two calls per case on CUDA, each judged): R9's narrowed fa3-jax survey again,
#       same seed, to count how many of the overflow's cases fail now
#   R13: carry .device/fa3.tar.xz                                                    (~120 s)
#       issue 12.3 on a quiet machine (P5's figures were taken beside TileOPs builds): the float64
#       truth next to FA3's backward at S = 16k and 64k (B1 H8 D128 causal bf16), then one 16k truth
#       call under torch.profiler (GEMMs vs elementwise passes)
#   R14: carry .device/fa3.tar.xz                                                    (~240 s)
#       issue 12.3 with the truth's elementwise passes fused (oracles/fused_passes.py): the compiled
#       kernels against the eager truth and dense float64 (GPU tests), the truth fused and eager side
#       by side next to FA3 at 16k..128k, the fused 16k call's profile, and Triton's float64 tl.dot
#       rate next to cuBLAS (does a fully fused float64 kernel pay?)
#   R15: carry .device/fa3.tar.xz: R14 after 2 more commits, then a 40-example fa3 gpu campaign (~420 s)
#   R16: carry .device/fa3.tar.xz: the GPU oracle tests, tl.dot float64 rate, 16k/64k with more repeats (~200 s)
#   R17: carry nothing: the GPU-marked oracle tests alone (~60 s)
#   R18: carry .device/fa3.tar.xz: the 64k truth's wall time vs its kernels, allocator calls (~150 s)
#   R19: carry nothing: scripts/device/oracle_chunks.py, the truth's chunk cap x SKIP_CHUNKS (~300 s)
#   R20: carry .device/fa3.tar.xz: the committed chunking, GPU oracle tests and the bench 16k..128k (~200 s)
#   R21: carry nothing: tests/test_fused_passes.py whole, in one process (~150 s)
# Wave 2, stop 15 (2026-12-01):
#   R22: carry .device/fa3.tar.xz: Q K^T and dO V^T fused into the truth's passes, bfloat16 magnitudes: GPU
#        oracle tests, the fused GEMMs' tile sweep, the bench with every variant side by side, a 64k profile (~420 s)
#   R23: carry .device/fa3.tar.xz: after the allocator-aware chunk budget and E loaded before dO V^T: GPU oracle
#        tests, each fused GEMM kernel's tile sweep alone (scripts/device/fused_gemm_tiles.py), the bench (~450 s)
#   R24: carry .device/fa3.tar.xz: the committed truth (tuned tiles): GPU oracle tests, the bench with every
#        variant side by side, a 64k profile, a 40-example fa3 gpu campaign judged by it (~420 s)
#   R25: carry nothing: scripts/device/truth_streams.py, two truths at once on two streams vs one after the other (~120 s)
#   R26: carry .device/tilelang.tar.xz: issue 12.2 for tilelang-det with a WARM cache: every configuration built
#        first (warm, up to 200 s), then the 200-example gpu campaign and its time split (~400 s)
#   R27: carry .device/fa3.tar.xz .device/tilelang.tar.xz: every GPU-marked test (-n 4 on the one GPU, 25 s
#        campaigns): the bfloat16 magnitudes change every CUDA verdict's budget floor (~540 s)
#   R28: carry nothing: scripts/device/fused_gemm_split.py, a fused kernel's float64 product vs its epilogue (~60 s)
#   R29: carry .device/fa3.tar.xz: after the fused kernels' strides are specialised: GPU oracle tests, the cost split,
#        the tile sweep, the bench (truth and passes only next to FA3) (~300 s)
#   R30: carry nothing: scripts/device/oracle_chunks.py, MAX_SKIP_ROWS 1024..8192 at 64k and 128k with the
#        committed fused kernels (~120 s)
#   R31: carry .device/fa3.tar.xz: the 40-example fa3 gpu campaign of R24 again, judged by the truth with the
#        specialised kernels (~100 s)
# Wave 2, stop 16 (2026-12-01):
#   R33: carry .device/fa3.tar.xz .device/tilelang.tar.xz: HEAD (fused GEMMs from 2^26 scores, K's shift copy built
#        only when used): GPU oracle tests beside the TileLang warm-up, the bench 16k..128k (3 truth calls), a 128k
#        profile, R31's fa3 campaign (its truth time), tilelang-det's gpu campaign in one process under cProfile
#        (R26's 66 ms per case of unattributed "search" time, ten times the fa3 campaign's), the fused GEMM
#        kernels with the head dim taken 32 at a time (R23/R29 swept 8 and 16) (~520 s)
#   R34: carry .device/fa3.tar.xz .device/tilelang.tar.xz: after the determinism gate compares on the device and the
#        input digest hashes on a thread: R26's tilelang-det campaign (every configuration built first) and R33's fa3
#        campaign, their time splits; beside the TileLang warm-up, dp_ds's BK=32 tiles and the whole truth at 16k,
#        64k and 128k with the best of them against the committed tile; the bench again (run-to-run spread) (~330 s)
#   R35: carry .device/fa3.tar.xz .device/tilelang.tar.xz .device/old_oracles (R29's tree's oracles, 7476208):
#        scripts/device/truth_versions.py, HEAD's truth and R29's called alternately in one process (R33/R34's
#        bench put HEAD 3-4% above R29 at every length); then every GPU-marked test (R27's command) beside the
#        dq-nondeterministic-order mutant on CUDA (the determinism gate now compares on the device) (~380 s)
#   R36: carry nothing: scripts/device/long_gemms.py, the truth's four long float64 GEMMs in other orientations and
#        under cuBLAS and cuBLASLt at the 64k and 128k chunk widths, then the 64k truth under each library (~120 s)
#   R37: carry .device/fa3.tar.xz: after the shift columns are built per chunk band: GPU oracle tests, the bench (~150 s)
#   R38: carry .device/fa4.tar.xz: phase 8's R8 fa4 gpu campaign (200 examples, narrowed away from FA4's findings)
#        after the device-side determinism gate and the threaded digest, for its time split (issue 12.2) (~300 s)
#   R39: carry .device/fa3.tar.xz .device/tilelang.tar.xz: after the truth walks equal-length sequences together: GPU oracle tests beside
#        the TileLang warm-up, R34's tilelang-det campaign (its truth per case), the bench (~220 s)
#   R40: carry .device/fa3.tar.xz .device/tilelang.tar.xz: after the isolation worker ends quietly when its parent's
#        pipe end closes and the truth's Triton builds became their own phase ("truth_compile"): every GPU-marked test
#        (the new warm-up test among them) beside tests/test_faults.py and tests/test_lanes.py on this machine; then
#        R34's 40-example fa3 gpu campaign for its split of the truth's time (~480 s). Stop 17 had no device time;
#        run first in stop 18
#   R41: carry .device/fa3.tar.xz .device/tilelang.tar.xz: with truth_compile: R34's tilelang-det gpu campaign (its
#        split, the truth's builds apart), then the bench 16k..128k (the warm-up's lookup per launch) (~260 s)
#   R42: carry .device/fa3.tar.xz .device/tilelang.tar.xz .device/tree_2af68cd (`git archive 2af68cd difftest oracles
#        kernels strategies`, R34's engine): R41's tilelang-det campaign took 305 ms a case against R34's 136: the draw
#        (unseeded) or the engine? The same seeded campaign under HEAD and R34's tree, alternately, twice each (~300 s)
#   R43: carry .device/tilelang.tar.xz: a seeded search draws from its seed alone (f70dd0f): the atomic (nondeterministic
#        dQ) TileLang kernel's seeded gpu campaign twice, then tilelang-det's twice: the same Problems in the same
#        order (scripts/device/same_draws.py), and `difftest gate` of each second run against its first (~330 s)
#   R44: carry .device/tilelang.tar.xz: R43's seeded campaigns (seed 11) once each after the gate accepts a non-finite
#        dK/dQ row where a correct kernel's dS may overflow (c605f8e); any failure's reproducer JSONs kept (~250 s)
# Usage: bash scripts/device/one.sh R1|R2|...|R44
set -o pipefail
call=${1:?R1|R2|...|R44}
source scripts/device/common.sh
stamp "start $call"
# R34's tilelang-det gpu campaign (200 examples, 60 s of search), its time split kept, its report dropped
tl_campaign_split() {
  timeout 100 python3 -m difftest run -k tilelang-det -p gpu --device cuda --max-examples 200 --time-budget 60 \
    --shrink-budget 10 --out $R/overhead --db none > $L/overhead.log 2>&1
  stamp "tilelang-det campaign exit $?"
  python3 scripts/device/campaign_split.py $R/overhead/report.json $R/overhead-timing.json
  rm -rf $R/overhead
}
# the float64 truth next to FA3's backward, B1 H8 D128 causal at 16k..128k (issue 12.3)
oracle_bench() {
  timeout 100 python3 -m difftest bench --oracle -k fa3 --repeats 20 --oracle-repeats 3 \
    --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
}
case $call in
R1)
  ( timeout 420 $S --out $R --seconds 380 --timeout 60 flash-attention-triton 200 > $L/fat.log 2>&1
    stamp "flash-attention-triton survey exit $?" ) &
  for op in gqa mha; do
    ( GPU=0 OP=$op NAME=$call-$op REPRO=0 JOBS=6 WARM_S=120 BUDGET=${BUDGET:-490} CASE_TIMEOUT=90 \
        bash scripts/device/tileops.sh > $L/tileops-$op.log 2>&1
      stamp "tileops $op exit $?" ) &
  done
  lanes_done ;;
R2)
  ( PYTHONPATH=/tmp/tileops_site SWEEP_JOBS=8 SWEEP_TIMEOUT_S=200 timeout 330 \
      python3 results/bugs/tileops/repro_tileops_head_dims.py > $L/head_dims.jsonl 2> $L/head_dims.err
    stamp "repro_tileops_head_dims exit $?" ) &
  D=$(seq -s, 16 16 272)
  for op in gqa mha; do
    DET=; [ $op = gqa ] && DET=--det-first
    ( GPU=0 OP=$op NAME=$call-$op REPRO=0 WARM_S=0 BUDGET=${BUDGET:-420} CASE_TIMEOUT=150 \
        SURVEY_ARGS="$DET --narrow head_dims_qk=$D" bash scripts/device/tileops.sh > $L/tileops-$op.log 2>&1
      stamp "tileops $op exit $?" ) &
  done
  lanes_done ;;
R3)
  mkdir -p $R/overhead
  OUT=$R/overhead timeout 250 bash scripts/device/overhead.sh > $L/overhead.log 2>&1
  stamp "overhead.sh exit $?"
  ( timeout 190 python3 -m difftest mutants -p gpu --device cuda --no-grid --per-mutant-budget 40 --shrink-budget 8 \
      --only delta-input-dtype-accumulation dq-cast-before-scale dq-fp16-accumulation dq-first-16-rows \
      stride-blind-kernel-cache tl-causal-off-by-one tl-dsink-sign tl-tail-block-skipped tl-gqa-head-map \
      --out $R/mutants-gpu-cuda.md --out-dir $R/mutants > $L/mutants.log 2>&1
    stamp "mutants exit $?" ) &
  ( timeout 180 $S --out $R --seconds 150 --timeout 60 --narrow values=large_do tilelang-det 200 > $L/large_do.log 2>&1
    stamp "tilelang-det large_do survey exit $?" ) &
  lanes_done ;;
R4)
  D=24,32,40,56,64,96,112,128,160,192,224,256
  timed_run fa4 0 250 -k fa4 -p gpu --max-examples 200 --time-budget 200 --shrink-budget 20 --out $R/fa4 --db none \
    --narrow head_dims_qk=$D --narrow head_dims_v=$D --narrow equal_head_dims=true --narrow sinks=false &
  ( timeout 240 python3 -m difftest mutants -p gpu --device cuda --no-grid --per-mutant-budget 35 --shrink-budget 8 \
      --only delta-input-dtype-accumulation dq-cast-before-scale dq-fp16-accumulation dq-first-16-rows \
      stride-blind-kernel-cache --out $R/mutants-gpu-cuda.md --out-dir $R/mutants > $L/mutants.log 2>&1
    stamp "mutants exit $?" ) &
  lanes_done ;;
R5)
  export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX beside torch on one GPU
  ( timeout 240 python3 scripts/device/fa3jax_smoke.py > $R/fa3jax-smoke.jsonl 2> $L/smoke.log
    stamp "fa3jax smoke exit $?" ) &
  # determinism first (3 fixed problems the capability covers), shrinking bounded as $S does: the lane fits 470 s
  ( timeout 470 python3 scripts/device/survey.py --out $R --seconds 300 --timeout 120 --det-runs 20 --det-first \
      --shrink 25 --max-shrinks 2 fa3-jax 200 > $L/fa3-jax.log 2>&1
    stamp "fa3-jax survey exit $?" ) &
  lanes_done
  cut -c1-900 $R/fa3jax-smoke.jsonl ;;
R6|R8)
  ( cd results/bugs/fa4
    for f in repro_fa4_d40_varlen_window repro_fa4_d112_offset repro_fa4_sink_lse_inf repro_fa4_sink_lse_inf_d24; do
      echo "== $f"; timeout 100 python3 $f.py; echo "exit $?"
    done ) > $L/fa4-standalone.log 2>&1
  stamp "fa4 standalone scripts done"; cat $L/fa4-standalone.log | grep -v Warning | cut -c1-400
  if [ $call = R8 ]; then
    D=24,32,56,64,96,128,160,192,224,256
    timed_run fa4 0 380 -k fa4 -p gpu --max-examples 200 --time-budget 340 --shrink-budget 20 --out $R/fa4 --db none \
      --narrow head_dims_qk=$D --narrow head_dims_v=$D --narrow equal_head_dims=true --narrow sinks=false
    grep -E "cases|overhead|compile|kernel|truth|search" $L/fa4.log | tail -n 25 | cut -c1-200
  fi ;;
R7)
  ( cd results/bugs/fa3-jax; F=repro_fa3jax_bwd_scratch_overflow.py
    timeout 200 python3 $F --repeats 2 > $L/fa3jax-sweep.jsonl 2> $L/fa3jax-sweep.err; stamp "fa3jax sweep exit $?"
    for s in 100 80; do
      XLA_PYTHON_CLIENT_ALLOCATOR=platform timeout 120 compute-sanitizer --tool memcheck --print-limit 4 \
        python3 $F --one $s > $L/fa3jax-memcheck-s$s.log 2>&1; stamp "fa3jax memcheck s$s exit $?"
    done ) &
  D=$(seq -s, 16 16 144)
  for op in gqa mha; do
    ( GPU=0 OP=$op NAME=$call-$op REPRO=0 JOBS=6 WARM_S=100 BUDGET=${BUDGET:-470} CASE_TIMEOUT=90 \
        SURVEY_ARGS="--narrow head_dims_qk=$D" bash scripts/device/tileops.sh > $L/tileops-$op.log 2>&1
      stamp "tileops $op exit $?" ) &
  done
  lanes_done
  cut -c1-300 $L/fa3jax-sweep.jsonl; grep -h -E "Invalid|ERROR SUMMARY|wrong" $L/fa3jax-memcheck-s*.log | head -20 ;;
R9)
  for k in fa3-jax fa3-jax-rules; do
    ( timeout 200 $S --out $R --seconds 140 --timeout 60 --seed 7 --narrow causal=false --narrow window=false \
        --narrow varlen=false --narrow max_seqlen=400 $k 200 > $L/$k.log 2>&1
      stamp "$k survey exit $?" ) &
  done
  ( timeout 240 python3 scripts/device/build_vs_hang.py --out $R/build_vs_hang > $L/build_vs_hang.log 2>&1
    stamp "build_vs_hang exit $?" ) &
  lanes_done
  for k in fa3-jax fa3-jax-rules; do tail -n 3 $L/$k.log | cut -c1-600; done; tail -n 4 $L/build_vs_hang.log ;;
R10)
  ( timeout 230 $S --out $R --seconds 170 --timeout 60 fa3-jax 200 > $L/fa3-jax.log 2>&1
    stamp "fa3-jax survey exit $?" ) &
  ( timeout 240 python3 scripts/device/build_vs_hang.py --out $R/build_vs_hang > $L/build_vs_hang.log 2>&1
    stamp "build_vs_hang exit $?" ) &
  lanes_done
  tail -n 4 $L/fa3-jax.log | cut -c1-600; grep -E "^(build|hang):" $L/build_vs_hang.log ;;
R11)
  ( cd scripts/device && timeout 150 python3 -c "
import json, campaigns
from difftest.execute import adapter as registry
rows = campaigns.determinism(registry.get('fa3-jax'), 20)
json.dump(rows, open('$R/fa3-jax.determinism.json', 'w'), indent=1, default=str)" > $L/det.log 2>&1
    stamp "fa3-jax determinism exit $?" )
  grep "^determinism" $L/det.log | cut -c1-300 ;;
R12)
  timeout 200 $S --out $R --seconds 140 --timeout 60 --seed 7 --narrow causal=false --narrow window=false \
    --narrow varlen=false --narrow max_seqlen=400 fa3-jax 200 > $L/fa3-jax.log 2>&1
  stamp "fa3-jax survey exit $?"; tail -n 3 $L/fa3-jax.log | cut -c1-400 ;;
R13)
  timeout 100 python3 -m difftest bench --oracle -k fa3 --repeats 5 --oracle-repeats 2 --shape 1,8,16384,128 --shape 1,8,65536,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  timeout 60 python3 scripts/device/oracle_profile.py > $L/oracle-profile.log 2>&1
  stamp "oracle profile exit $?"; cat $R/oracle.md; grep -v "^-" $L/oracle-profile.log | head -32 | cut -c1-200 ;;
R14)
  timeout 150 python3 -m pytest -q -p no:randomly tests/test_fused_passes.py -k cuda > $L/pytest-fused.log 2>&1
  stamp "fused-pass GPU tests exit $?"
  timeout 240 python3 -m difftest bench --oracle -k fa3 --eager --repeats 5 --oracle-repeats 2 --shape 1,8,16384,128 \
    --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 --json $R/oracle.json --markdown $R/oracle.md \
    > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  timeout 60 python3 scripts/device/oracle_profile.py > $L/oracle-profile.log 2>&1
  stamp "oracle profile exit $?"
  timeout 100 python3 scripts/device/f64_dot.py > $L/f64-dot.log 2>&1
  stamp "f64 dot exit $?"
  tail -3 $L/pytest-fused.log; cat $R/oracle.md; grep -v "^-" $L/oracle-profile.log | head -30 | cut -c1-200
  cat $L/f64-dot.log ;;
R15)  # R14 again after the one-read-per-sequence shift and the unsplit fused terms, plus a short fa3 campaign
  bash scripts/device/one.sh R14
  timed_run fa3-gpu 0 200 -k fa3 -p gpu --max-examples 40 --time-budget 150 --shrink-budget 20 --out $R/fa3 --db none
  tail -n 25 $L/fa3-gpu.log ;;
R16)  # the GPU-marked oracle tests, Triton's float64 tl.dot with out_dtype=float64, the truth at 16k/64k repeated
  timeout 200 python3 -m pytest -q -n 4 -p no:randomly tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles.log 2>&1
  stamp "oracle tests exit $?"
  timeout 100 python3 scripts/device/f64_dot.py > $L/f64-dot.log 2>&1
  stamp "f64 dot exit $?"
  timeout 150 python3 -m difftest bench --oracle -k fa3 --eager --repeats 30 --oracle-repeats 4 --shape 1,8,16384,128 \
    --shape 1,8,65536,128 --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  tail -3 $L/pytest-oracles.log; grep -v "ieee=.*CompilationError" $L/f64-dot.log | head -40 | cut -c1-300
  cat $R/oracle.md ;;
R17)  # R16's test step timed out in the CPU tests (-n 4 on a 16-core host): the GPU-marked oracle tests alone
  timeout 200 python3 -m pytest -q -p no:randomly -m gpu -rA tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $L/pytest-oracles-gpu.log | tail -30 ;;
R18)  # 64k scaled worse than 16k (R15): is wall time lost outside the kernels? profile it, count allocator calls
  timeout 90 python3 -m difftest bench --oracle -k fa3 --repeats 10 --oracle-repeats 3 --shape 1,8,65536,128 \
    --json $R/oracle.json > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 python3 -m difftest bench --oracle -k fa3 --repeats 10 \
    --oracle-repeats 3 --shape 1,8,65536,128 --json $R/oracle-expandable.json > $L/oracle-expandable.log 2>&1
  stamp "oracle bench, expandable segments, exit $?"
  timeout 90 python3 scripts/device/oracle_profile.py --seqlen 65536 > $L/oracle-profile-64k.log 2>&1
  stamp "oracle profile 64k exit $?"
  for f in $R/oracle.json $R/oracle-expandable.json; do python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rows'][0]['truth']; print(sys.argv[1], r['all_seconds'], r.get('allocator'))" $f; done
  grep -v "^-" $L/oracle-profile-64k.log | head -22 | cut -c1-75,150-200 ;;
R19)  # the truth's chunk size on the H200: cap x minimum chunks at 16k..64k, then 128k
  timeout 250 python3 scripts/device/oracle_chunks.py --seqlen 16384 --seqlen 32768 --seqlen 65536 \
    > $R/chunks.jsonl 2> $L/chunks.err
  stamp "chunk sweep exit $?"
  timeout 150 python3 scripts/device/oracle_chunks.py --seqlen 131072 --caps 29,30,31 --skip-chunks 16 \
    >> $R/chunks.jsonl 2>> $L/chunks.err
  stamp "chunk sweep 128k exit $?"
  cat $R/chunks.jsonl; tail -3 $L/chunks.err ;;
R20)  # the committed chunking (cap 2**31, at most 2048 rows per masked chunk): GPU oracle tests, then the
  # truth fused and eager next to FA3 at 16k..128k
  timeout 120 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 240 python3 -m difftest bench --oracle -k fa3 --eager --repeats 20 --oracle-repeats 2 --shape 1,8,16384,128 \
    --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 --json $R/oracle.json --markdown $R/oracle.md \
    > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  tail -1 $L/pytest-oracles-gpu.log; cat $R/oracle.md ;;
R21)  # the whole fused-pass test file in one process: interpreter tests first, then the compiled GPU ones
  timeout 300 python3 -m pytest -q -p no:randomly -rA tests/test_fused_passes.py > $L/pytest-fused-all.log 2>&1
  stamp "fused-pass tests exit $?"
  grep -E "^(FAILED|ERROR)|test_on_cuda|passed|failed" $L/pytest-fused-all.log | tail -12 ;;
R22)  # the GEMMs fused into the passes and bfloat16 magnitudes: GPU tests, tiles, bench (all variants), profile
  timeout 150 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 100 python3 scripts/device/fused_gemm_tiles.py > $R/tiles.jsonl 2> $L/tiles.err
  stamp "tile sweep exit $?"
  timeout 260 python3 -m difftest bench --oracle -k fa3 --eager --passes-only --float32-magnitudes --repeats 20 \
    --oracle-repeats 2 --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  timeout 60 python3 scripts/device/oracle_profile.py --seqlen 65536 > $L/oracle-profile-64k.log 2>&1
  stamp "oracle profile 64k exit $?"
  tail -3 $L/pytest-oracles-gpu.log; cat $R/tiles.jsonl; tail -3 $L/tiles.err; cat $R/oracle.md
  grep -v "^-" $L/oracle-profile-64k.log | head -24 | cut -c1-75,150-200 ;;
R23)  # the fused GEMM kernels' tiles, each alone; the bench with its variants on an allocator-aware chunk budget
  timeout 60 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 280 python3 scripts/device/fused_gemm_tiles.py > $R/tiles.jsonl 2> $L/tiles.err
  stamp "tile sweep exit $?"
  timeout 200 python3 -m difftest bench --oracle -k fa3 --passes-only --float32-magnitudes --repeats 20 \
    --oracle-repeats 2 --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  tail -1 $L/pytest-oracles-gpu.log; grep -v '"tile"' $R/tiles.jsonl; tail -3 $L/tiles.err; cat $R/oracle.md
  python3 scripts/device/fused_gemm_tiles.py --fastest $R/tiles.jsonl --top 4 ;;
R24)  # the committed truth: GPU tests, the bench with every variant, a 64k profile, a real campaign judged by it
  timeout 60 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 300 python3 -m difftest bench --oracle -k fa3 --eager --passes-only --float32-magnitudes --repeats 20 \
    --oracle-repeats 2 --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  timeout 60 python3 scripts/device/oracle_profile.py --seqlen 65536 > $L/oracle-profile-64k.log 2>&1
  stamp "oracle profile 64k exit $?"
  timed_run fa3-gpu 0 200 -k fa3 -p gpu --max-examples 40 --time-budget 150 --shrink-budget 20 --out $R/fa3 --db none
  rm -rf $R/fa3/*.html
  tail -1 $L/pytest-oracles-gpu.log; cat $R/oracle.md; tail -5 $L/fa3-gpu.log
  grep -v "^-" $L/oracle-profile-64k.log | head -24 | cut -c1-75,150-200 ;;
R25)  # does the truth gain from two streams? two independent half-size truths, sequential vs concurrent
  timeout 200 python3 scripts/device/truth_streams.py --seqlen 16384 --seqlen 65536 > $R/streams.jsonl 2> $L/streams.err
  stamp "streams exit $?"
  cat $R/streams.jsonl; tail -3 $L/streams.err ;;
R26)  # tilelang-det's overhead with every TileLang configuration built before the campaign starts
  timeout 200 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
  stamp "tilelang warm exit $?"
  timeout 160 python3 -m difftest run -k tilelang-det -p gpu --device cuda --max-examples 200 --time-budget 130 \
    --shrink-budget 20 --out $R/overhead --db none > $L/overhead.log 2>&1
  stamp "campaign exit $?"
  python3 scripts/device/campaign_split.py $R/overhead/report.json $R/timing.json
  rm -rf $R/overhead/runs/*/report.html $R/overhead/report.html
  tail -3 $L/warm.log ;;
R27)  # every GPU-marked test with the committed truth (real kernels' gates and campaigns judged by it)
  DIFFTEST_GPU_CAMPAIGN_SECONDS=25 timeout 530 python3 -m pytest -q -p no:randomly -m gpu -n 4 -rfEs tests/ \
    > $L/pytest-gpu.log 2>&1
  stamp "GPU tests exit $?"
  grep -E "^(FAILED|ERROR)|passed|failed" $L/pytest-gpu.log | tail -25 ;;
R28)  # a fused GEMM kernel's cost split: the Triton float64 product alone, then each part of the epilogue
  timeout 120 python3 scripts/device/fused_gemm_split.py > $R/split.jsonl 2> $L/split.err
  stamp "split exit $?"
  cat $R/split.jsonl; tail -5 $L/split.err ;;
R29)  # the fused GEMM kernels with their strides specialised: tests, split, tiles, bench
  timeout 60 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 60 python3 scripts/device/fused_gemm_split.py > $R/split.jsonl 2> $L/split.err
  stamp "split exit $?"
  timeout 200 python3 scripts/device/fused_gemm_tiles.py > $R/tiles.jsonl 2> $L/tiles.err
  stamp "tile sweep exit $?"
  timeout 200 python3 -m difftest bench --oracle -k fa3 --passes-only --repeats 20 --oracle-repeats 2 \
    --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  tail -1 $L/pytest-oracles-gpu.log; cat $R/split.jsonl; grep -v '"tile"' $R/tiles.jsonl; cat $R/oracle.md
  python3 scripts/device/fused_gemm_tiles.py --fastest $R/tiles.jsonl --top 3 ;;
R30)  # rows per masked chunk with the committed fused kernels
  timeout 150 python3 scripts/device/oracle_chunks.py --seqlen 65536 --seqlen 131072 --caps 31 --skip-chunks 16 \
    --max-rows 1024,2048,4096,8192 > $R/chunks.jsonl 2> $L/chunks.err
  stamp "chunk sweep exit $?"
  cat $R/chunks.jsonl; tail -3 $L/chunks.err ;;
R31)  # R24's campaign with the committed (specialised) fused kernels
  timed_run fa3-gpu 0 200 -k fa3 -p gpu --max-examples 40 --time-budget 150 --shrink-budget 20 --out $R/fa3 --db none
  python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))['campaigns'][0]
json.dump({k: c.get(k) for k in ('kernel', 'status', 'examples', 'elapsed_s', 'timing')}, open(sys.argv[2], 'w'), indent=1)
print(c['status'], c['examples'], c['elapsed_s'], json.dumps(c['timing']['phases_s']))
" $R/fa3/report.json $R/fa3-timing.json
  rm -rf $R/fa3/*.html $R/fa3/runs/*/report.* $R/fa3/report.json $R/fa3/latest
  tail -12 $L/fa3-gpu.log ;;
R33)  # HEAD: tests, bench, the fa3 campaign's truth time, tilelang-det under cProfile, 128k profile, BK=32 tiles
  ( timeout 200 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
    stamp "tilelang warm exit $?" ) &
  timeout 100 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  lanes_done
  timeout 150 python3 -m difftest bench --oracle -k fa3 --repeats 20 --oracle-repeats 3 \
    --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  timed_run fa3-gpu 0 150 -k fa3 -p gpu --max-examples 40 --time-budget 120 --shrink-budget 20 --out $R/fa3 --db none
  python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))['campaigns'][0]
json.dump({k: c.get(k) for k in ('kernel', 'status', 'examples', 'elapsed_s', 'timing')}, open(sys.argv[2], 'w'), indent=1)
print(c['status'], c['examples'], c['elapsed_s'], json.dumps(c['timing']['phases_s']))
" $R/fa3/report.json $R/fa3-timing.json
  rm -rf $R/fa3
  timeout 100 python3 -m cProfile -o $R/tl.prof -m difftest run -k tilelang-det -p gpu --device cuda --no-isolate \
    --max-examples 60 --time-budget 45 --shrink-budget 10 --out $R/tl --db none > $L/tl.log 2>&1
  stamp "tilelang-det under cProfile exit $?"
  python3 -c "
import pstats, sys
st = pstats.Stats(sys.argv[1], stream=open(sys.argv[2], 'w'))
st.sort_stats('cumulative').print_stats(60); st.sort_stats('tottime').print_stats(40)
" $R/tl.prof $R/tl-prof.txt
  rm -rf $R/tl/runs $R/tl/*.html
  timeout 60 python3 scripts/device/oracle_profile.py --seqlen 131072 > $L/oracle-profile-128k.log 2>&1
  stamp "oracle profile 128k exit $?"
  timeout 80 python3 scripts/device/fused_gemm_tiles.py --bk 32 --shape 64k --no-truth > $R/tiles.jsonl 2> $L/tiles.err
  stamp "BK=32 tile sweep exit $?"
  tail -1 $L/pytest-oracles-gpu.log; cat $R/oracle.md; tail -16 $L/tl.log; cat $R/tiles.jsonl | cut -c1-200
  grep -v "^-" $L/oracle-profile-128k.log | head -24 | cut -c1-75,150-200
  grep -A 45 "cumulative" $R/tl-prof.txt | head -60 | cut -c1-160 ;;
R34)  # the device-side determinism gate and the threaded digest: campaigns' time splits; dp_ds at BK=32; bench again
  ( timeout 200 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
    stamp "tilelang warm exit $?" ) &
  timeout 120 python3 scripts/device/fused_gemm_tiles.py --bk 32 --kernel dp_ds --shape 64k --truth-seqlen 16384 \
    --truth-seqlen 65536 --truth-seqlen 131072 > $R/tiles.jsonl 2> $L/tiles.err
  stamp "dp_ds BK=32 tiles and truths exit $?"
  lanes_done
  timeout 160 python3 -m difftest run -k tilelang-det -p gpu --device cuda --max-examples 200 --time-budget 130 \
    --shrink-budget 20 --out $R/overhead --db none > $L/overhead.log 2>&1
  stamp "tilelang-det campaign exit $?"
  timed_run fa3-gpu 0 150 -k fa3 -p gpu --max-examples 40 --time-budget 120 --shrink-budget 20 --out $R/fa3 --db none
  for c in overhead fa3; do python3 scripts/device/campaign_split.py $R/$c/report.json $R/$c-timing.json; done
  rm -rf $R/overhead $R/fa3
  timeout 150 python3 -m difftest bench --oracle -k fa3 --repeats 20 --oracle-repeats 3 \
    --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  grep -v '"tile"' $R/tiles.jsonl | cut -c1-250; sort -t: -k5 $R/tiles.jsonl | grep '"tile"' | head -4 | cut -c1-200
  cat $R/oracle.md; tail -3 $L/warm.log ;;
R35)  # HEAD's truth beside R29's in one process; every GPU-marked test; the nondeterminism mutant on CUDA
  timeout 150 python3 scripts/device/truth_versions.py --other .device/old_oracles > $R/versions.jsonl 2> $L/versions.err
  stamp "truth versions exit $?"
  ( timeout 200 python3 -m difftest mutants -p gpu --device cuda --no-grid --per-mutant-budget 40 --shrink-budget 8 \
      --only dq-nondeterministic-order --out $R/mutants-gpu-cuda.md --out-dir $R/mutants > $L/mutants.log 2>&1
    stamp "mutants exit $?" ) &
  DIFFTEST_GPU_CAMPAIGN_SECONDS=25 timeout 400 python3 -m pytest -q -p no:randomly -m gpu -n 4 -rfEs tests/ \
    > $L/pytest-gpu.log 2>&1
  stamp "GPU tests exit $?"
  lanes_done
  cut -c1-400 $R/versions.jsonl; tail -3 $L/versions.err; cat $R/mutants-gpu-cuda.md | head -30
  grep -E "^(FAILED|ERROR)|passed|failed" $L/pytest-gpu.log | tail -25 ;;
R36)  # the long float64 GEMMs' orientations and BLAS libraries; the truth under each library
  timeout 200 python3 scripts/device/long_gemms.py --truth 65536 > $R/long_gemms.jsonl 2> $L/long_gemms.err
  stamp "long GEMMs exit $?"
  cut -c1-300 $R/long_gemms.jsonl; tail -3 $L/long_gemms.err ;;
R37)  # the committed truth once more: GPU oracle tests and the bench
  timeout 100 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  timeout 150 python3 -m difftest bench --oracle -k fa3 --repeats 20 --oracle-repeats 3 \
    --shape 1,8,16384,128 --shape 1,8,32768,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $R/oracle.json --markdown $R/oracle.md > $L/oracle.log 2>&1
  stamp "oracle bench exit $?"
  tail -1 $L/pytest-oracles-gpu.log; cat $R/oracle.md ;;
R38)  # the fa4 gpu campaign of R8 on the current engine
  D=24,32,56,64,96,128,160,192,224,256
  timed_run fa4 0 380 -k fa4 -p gpu --max-examples 200 --time-budget 340 --shrink-budget 20 --out $R/fa4 --db none \
    --narrow head_dims_qk=$D --narrow head_dims_v=$D --narrow equal_head_dims=true --narrow sinks=false
  python3 scripts/device/campaign_split.py $R/fa4/report.json $R/fa4-timing.json
  grep -E "^fa4 " $L/fa4.log | head -8
  rm -rf $R/fa4 ;;
R40)  # the worker and truth_compile changes: every GPU-marked test, the fault and lane tests; fa3's split
  ( timeout 300 python3 -m pytest -q -p no:randomly -n 4 -rfE tests/test_faults.py tests/test_lanes.py \
      > $L/pytest-faults-lanes.log 2>&1
    stamp "fault and lane tests exit $?" ) &
  DIFFTEST_GPU_CAMPAIGN_SECONDS=25 timeout 330 python3 -m pytest -q -p no:randomly -m gpu -n 4 -rfEs tests/ \
    > $L/pytest-gpu.log 2>&1
  stamp "GPU tests exit $?"
  lanes_done
  timed_run fa3-gpu 0 150 -k fa3 -p gpu --max-examples 40 --time-budget 120 --shrink-budget 20 --out $R/fa3 --db none
  python3 scripts/device/campaign_split.py $R/fa3/report.json $R/fa3-timing.json
  rm -rf $R/fa3
  grep -E "^(FAILED|ERROR)|passed|failed" $L/pytest-gpu.log $L/pytest-faults-lanes.log | tail -25 ;;
R39)  # the truth walking equal lengths together: GPU tests, tilelang-det's time split, the bench
  ( timeout 150 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
    stamp "tilelang warm exit $?" ) &
  timeout 100 python3 -m pytest -q -p no:randomly -m gpu tests/test_fused_passes.py tests/test_oracles.py \
    > $L/pytest-oracles-gpu.log 2>&1
  stamp "GPU oracle tests exit $?"
  lanes_done
  tl_campaign_split
  oracle_bench
  tail -1 $L/pytest-oracles-gpu.log; cat $R/oracle.md ;;
R41)  # truth_compile in tilelang-det's split; the bench after the warm-up per launch
  timeout 150 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
  stamp "tilelang warm exit $?"
  tl_campaign_split
  oracle_bench
  cat $R/oracle.md ;;
R42)  # the same seeded tilelang-det campaign under HEAD and R34's engine, alternately
  timeout 150 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
  stamp "tilelang warm exit $?"
  for i in 1 2; do
    for tree in head old; do
      dir=$PWD; [ $tree = old ] && dir=$PWD/.device/tree_2af68cd
      ( cd $dir && PYTHONPATH=$dir:$PYTHONPATH timeout 90 python3 -m difftest run -k tilelang-det -p gpu --device cuda --seed 7 \
          --max-examples 120 --time-budget 75 --shrink-budget 10 --out $R/$tree$i --db none > $L/$tree$i.log 2>&1 )
      stamp "$tree$i exit $?"
      python3 scripts/device/campaign_split.py $R/$tree$i/report.json $R/$tree$i-timing.json
      rm -rf $R/$tree$i
    done
  done ;;
R43)  # a seeded search draws the same Problems run to run, for an atomic kernel too; the gate of a run against itself
  timeout 150 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
  stamp "tilelang warm exit $?"
  for k in tilelang tilelang-det; do
    for i in 1 2; do
      timed_run $k$i 0 110 -k $k -p gpu --seed 11 --max-examples 80 --time-budget 100 --shrink-budget 10 \
        --out $R/$k$i --db none
    done
    python3 scripts/device/same_draws.py $R/${k}1/report.json $R/${k}2/report.json | tee $R/$k-same-draws.txt
    python3 -m difftest gate --baseline $R/${k}1/report.json --candidate $R/${k}2/report.json > $R/$k-gate.txt 2>&1
    stamp "$k gate exit $?"
    tail -4 $R/$k-gate.txt
    for i in 1 2; do python3 scripts/device/campaign_split.py $R/$k$i/report.json $R/$k$i-timing.json > /dev/null; done
    rm -rf $R/${k}1 $R/${k}2
  done ;;
R44)  # R43's seeded campaigns after the dS overflow-edge rule
  timeout 150 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $L/warm.log 2>&1
  stamp "tilelang warm exit $?"
  for k in tilelang-det tilelang; do
    timed_run $k 0 110 -k $k -p gpu --seed 11 --max-examples 80 --time-budget 100 --shrink-budget 10 --out $R/$k --db none
    python3 scripts/device/campaign_split.py $R/$k/report.json $R/$k-timing.json > /dev/null
    mkdir -p $R/$k-repro && cp $R/$k/runs/*/repro/*.json $R/$k-repro/ 2> /dev/null
    rm -rf $R/$k
  done
  grep -h -A3 "FAILED\]\|passed (\|failed (" $L/tilelang*.log | cut -c1-400 ;;
*) echo "call: allowed R1..R44"; exit 2 ;;
esac
finish
