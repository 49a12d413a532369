#!/usr/bin/env bash
# Retest every upstream bug report's standalone script on the newest release we can carry, on one Hopper GPU,
# and write one line per report to $OUT/retest.txt:
#     <report> | <package> <version> | still fails | fixed | could not run (<why>) | <the script's last lines>
# Full stdout/stderr of every script goes to $OUT/retest-logs.txt (one file: a device call returns few files).
#
# Run from the repository root on the device, with the bundles already unpacked (see
# /work/shared/notes/device.md, "Getting packages there"). Each package lives in its own folder, put first on
# PYTHONPATH for its scripts only; a folder that is missing makes its reports "could not run":
#     SITE=/tmp/site                 fa4 bundle (cutlass-dsl 4.8.1, quack 0.6.5, tvm-ffi) and tilelang 0.1.15
#     FA4_NEW=/tmp/fa4-new           flash-attn-4 4.0.0b40 wheel unzipped (b39: point FA4_NEW at its folder)
#     CUDNN_SITE=/tmp/site-cudnn     nvidia-cudnn-frontend 1.32.0 wheel unzipped (cuDNN itself: torch's 9.19)
#     FA3JAX_SITE=/tmp/site-fa3jax   flash-attn3-jax 0.2.3 + einops wheels unzipped (jax 0.11.2 is on the device)
#     FASTFLASH_SITE=/tmp/site-ff    fastflash-attention 0.2.0 wheel unzipped
#     FLA_SITE=/tmp/site-fla         fla-core 0.6.0 + einops wheels unzipped
#     JVP_SITE=/tmp/site-jvp         jvp-flash-attention 0.14.0 wheel unzipped
#     FAT_SITE=/tmp/site-fat ADA_SITE=/tmp/site-ada FSA_SITE=/tmp/site-fsa CHILL_SITE=/tmp/site-chill EBT_SITE=/tmp/site-ebt
#         flash-attn-triton 0.1.1, adasplash 0.2.2, flash-sparse-attn 2.0.6 (+ triton_kernels), chill-attention 2.1.0,
#         ebt-flash-attention 0.2.0: each wheel unzipped into its own folder (see each folder's REPLAY.md)
#     TILEOPS_SITE=/tmp/site-tileops tileops bundle (tileops 0.1.0 + its tilelang 0.1.12): never mixed with SITE
#     TILELANG_EXAMPLE=.device/example_gqa_bwd.py   the example file the tilelang-example reports are about
#         (the posted one: awk 'NR>=45 && NR<=431' ../shared/seeds/004_*.txt > .device/example_gqa_bwd.py)
# Seven lanes run in parallel (compiles dominate; 16 cores); each script has its own time limit and the whole
# run stops at DEADLINE_S (default 450 s), so it ends inside 8 minutes. One script's failure never stops the rest.
#     OUT=/tmp/out bash results/bugs/retest_gpu.sh
set -u
B=results/bugs
OUT=${OUT:?set OUT}
SITE=${SITE:-/tmp/site} FA4_NEW=${FA4_NEW:-/tmp/fa4-new} CUDNN_SITE=${CUDNN_SITE:-/tmp/site-cudnn}
FA3JAX_SITE=${FA3JAX_SITE:-/tmp/site-fa3jax} FASTFLASH_SITE=${FASTFLASH_SITE:-/tmp/site-ff}
FLA_SITE=${FLA_SITE:-/tmp/site-fla} TILEOPS_SITE=${TILEOPS_SITE:-/tmp/site-tileops} JVP_SITE=${JVP_SITE:-/tmp/site-jvp}
FAT_SITE=${FAT_SITE:-/tmp/site-fat} ADA_SITE=${ADA_SITE:-/tmp/site-ada} FSA_SITE=${FSA_SITE:-/tmp/site-fsa}
CHILL_SITE=${CHILL_SITE:-/tmp/site-chill} EBT_SITE=${EBT_SITE:-/tmp/site-ebt}
TILELANG_EXAMPLE=${TILELANG_EXAMPLE:-.device/example_gqa_bwd.py}
DEADLINE_S=${DEADLINE_S:-450}
DSL=$SITE/nvidia_cutlass_dsl/dsl_packages
mkdir -p "$OUT/retest.d"
: > "$OUT/retest.txt"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)

version() {  # version PATHS DIST: the installed version of DIST under PYTHONPATH=PATHS, or "missing"
  PYTHONPATH=$1 python3 -c "from importlib.metadata import version; print(version('$2'))" 2>/dev/null || echo missing
}

run() {  # run NAME DIST PATHS LIMIT_S SCRIPT [ARGS...]: one report's script, one line in retest.d/NAME
  local name=$1 dist=$2 paths=$3 limit=$4 script=$5; shift 5
  local key=${name//\//_}
  local left=$(( DEADLINE_S - ($(date +%s) - T0) )) log="$OUT/retest.d/$key.log" ver status rc
  ver=$(version "$paths" "$dist")
  if [ "$ver" = missing ]; then
    status="could not run ($dist not found under $paths)"
  elif [ "$left" -le 5 ]; then
    status="could not run (no time left before the ${DEADLINE_S} s deadline)"
  else
    [ "$limit" -gt "$left" ] && limit=$left
    ( cd "$(dirname "$script")" && PYTHONPATH=$paths timeout -k 10 "$limit" python3 "$(basename "$script")" "$@" ) \
      > "$log.out" 2> "$log.err"
    rc=$?
    if [ $rc -eq 0 ]; then status="fixed"
    elif [ $rc -eq 1 ] && ! grep -q "^Traceback (most recent call last)" "$log.err"; then status="still fails"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="could not run (timed out after ${limit} s)"
    else status="could not run (rc $rc: $(grep -v '^\s*$' "$log.err" | tail -1 | cut -c1-200))"
    fi
  fi
  local nums; nums=$(grep -v '^\s*$' "$log.out" 2>/dev/null | grep -v '^\(BUG\|OK\)$' | tail -3 | tr '\n' ' ' | cut -c1-900)
  printf '%s | %s %s | %s | %s\n' "$name" "$dist" "$ver" "$status" "$nums" > "$OUT/retest.d/$key.line"
}

lane_fa4() {
  local p=$FA4_NEW:$SITE:$DSL
  run fa4/REPORT-sm90-bwd-hdim-mod32 flash-attn-4 "$p" 200 $B/fa4/repro_sm90_bwd_hdim_mod32.py
  run fa4/REPORT-sink-lse-inf flash-attn-4 "$p" 90 $B/fa4/repro_sink_lse_inf.py
  run fa4/REPORT-bwd-d32-dv120-illegal-access flash-attn-4 "$p" 120 $B/fa4/repro_bwd_d32_dv120_illegal_access.py
  run fa4/REPORT-insufficient-registers flash-attn-4 "$p" 150 $B/fa4/repro_insufficient_registers.py
}
lane_tileops() {  # the hang first: its own limit for seq_len 64 is 60 s
  run tileops/REPORT-bwd-hang-seqlen64 tileops "$TILEOPS_SITE" 170 $B/tileops/repro_bwd_hang_seqlen64.py 60
  run tileops/REPORT-nan-dq-extreme-logits tileops "$TILEOPS_SITE" 120 $B/tileops/repro_nan_dq_extreme_logits.py
  run tileops/REPORT-fwd-head-dim-smem tileops "$TILEOPS_SITE" 90 $B/tileops/repro_fwd_head_dim_smem.py
  # torch only (the installed one): each case in a child process, 20 cases
  run sdpa-flash/REPORT-misaligned-address torch "" 150 $B/sdpa-flash/repro_misaligned_address.py
}
lane_tilelang() {
  local ex; ex=$(realpath -m "$TILELANG_EXAMPLE")
  if [ -f "$ex" ]; then
    run tilelang-example/REPORT-dq-layout-overrun tilelang "$SITE" 150 \
      $B/tilelang-example/repro_dq_layout_overrun_short.py "$ex"
    run tilelang-example/REPORT-noncausal-tail-keys tilelang "$SITE" 150 \
      $B/tilelang-example/repro_noncausal_tail_keys_short.py "$ex"
  else
    for r in dq-layout-overrun noncausal-tail-keys; do
      echo "tilelang-example/REPORT-$r | tilelang $(version "$SITE" tilelang) | could not run (no example file at $ex) |" \
        > "$OUT/retest.d/tilelang-example_REPORT-$r.line"
    done
  fi
  run fastflash/REPORT-small-head-dims fastflash-attention "$FASTFLASH_SITE:$SITE" 60 $B/fastflash/repro_small_head_dims.py
  run fa3-jax/REPORT-bwd-scratch-overflow flash-attn3-jax "$FA3JAX_SITE" 90 $B/fa3-jax/repro_bwd_scratch_overflow.py
}
lane_jvp() {  # confirmed on the H100 2026-12-07 (jvp-flash/REPLAY.md)
  run jvp-flash/REPORT-head-dim-16 jvp-flash-attention "$JVP_SITE" 150 $B/jvp-flash/repro_head_dim_16.py
  run jvp-flash/REPORT-mask-large-logits jvp-flash-attention "$JVP_SITE" 240 $B/jvp-flash/repro_mask_large_logits.py
}
lane_hunt_a() {  # the package-hunt reports of 2026-12-07 (confirmed on the H100 that day; 9-53 s each)
  run chill-attention/REPORT-wheel-no-code chill-attention "$CHILL_SITE" 30 $B/chill-attention/repro_wheel_no_code.py
  run flash-attn-triton/REPORT-import-triton34 flash-attn-triton "$FAT_SITE" 30 $B/flash-attn-triton/repro_import_triton34.py
  run flash-attn-triton/REPORT-noncausal-padded-keys flash-attn-triton "$FAT_SITE" 60 $B/flash-attn-triton/repro_noncausal_padded_keys.py
  run flash-attn-triton/REPORT-seqlen-k-ne-q flash-attn-triton "$FAT_SITE" 60 $B/flash-attn-triton/repro_seqlen_k_ne_q.py
  run adasplash/REPORT-bwd-preprocess-oob adasplash "$ADA_SITE" 60 $B/adasplash/repro_bwd_preprocess_oob.py
  run adasplash/REPORT-gqa-v1-path adasplash "$ADA_SITE" 60 $B/adasplash/repro_gqa_v1_path.py
}
lane_hunt_b() {
  run flash-sparse-attn/REPORT-seqused-k-backward flash-sparse-attn "$FSA_SITE" 60 $B/flash-sparse-attn/repro_seqused_k_backward.py
  run flash-sparse-attn/REPORT-lse-descriptor-align flash-sparse-attn "$FSA_SITE" 60 $B/flash-sparse-attn/repro_lse_descriptor_align.py
  run flash-sparse-attn/REPORT-kernel-cache-seqlen1 flash-sparse-attn "$FSA_SITE" 120 $B/flash-sparse-attn/repro_kernel_cache_seqlen1.py
  run ebt-flash/REPORT-noncausal-tail-keys ebt-flash-attention "$EBT_SITE" 240 $B/ebt-flash/repro_noncausal_tail_keys.py
  run ebt-flash/REPORT-additive-mask-ln2 ebt-flash-attention "$EBT_SITE" 90 $B/ebt-flash/repro_additive_mask_ln2.py
  run ebt-flash/REPORT-head-dim-16 ebt-flash-attention "$EBT_SITE" 90 $B/ebt-flash/repro_head_dim_16.py
  run fla/REPORT-nsa-empty-seq fla-core "$FLA_SITE" 90 $B/fla/repro_fla_nsa_empty_seq.py
  run fla/REPORT-nsa-csr-oob fla-core "$FLA_SITE" 120 $B/fla/repro_fla_nsa_csr_oob.py
}
lane_cudnn_fla() {
  local c=$CUDNN_SITE
  run cudnn/REPORT-bwd-dqk-gt128-dv-lt-dqk nvidia-cudnn-frontend "$c" 60 $B/cudnn/repro_bwd_dqk_gt128_dv_lt_dqk.py
  run cudnn/REPORT-thd-gqa-decode-stats nvidia-cudnn-frontend "$c" 45 $B/cudnn/repro_thd_gqa_decode_stats.py
  run cudnn/REPORT-dsink-nondeterministic nvidia-cudnn-frontend "$c" 60 $B/cudnn/repro_dsink_nondeterministic.py
  # one script for the two FP8 reports; its argument picks the issue that sets the exit status
  run cudnn/REPORT-fp8-dq-partial-rows nvidia-cudnn-frontend "$c" 60 $B/cudnn/repro_fp8_bwd.py dq_rows
  run cudnn/REPORT-fp8-bwd-amax-short-seq nvidia-cudnn-frontend "$c" 60 $B/cudnn/repro_fp8_bwd.py amax
  run fla/REPORT-dsink-tail-rows fla-core "$FLA_SITE" 90 $B/fla/repro_dsink_tail_rows_short.py
  run fla/REPORT-hopper-bwd-smem fla-core "$FLA_SITE" 120 $B/fla/repro_hopper_bwd_smem_short.py
}
for lane in lane_fa4 lane_tileops lane_tilelang lane_cudnn_fla lane_jvp lane_hunt_a lane_hunt_b; do
  ( "$lane" ) &
done
wait

{
  echo "# retest $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
       "torch $(python3 -c 'import torch; print(torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>/dev/null)"
  cat "$OUT"/retest.d/*.line 2>/dev/null
} > "$OUT/retest.txt"
for f in "$OUT"/retest.d/*.log.out; do
  [ -e "$f" ] || continue
  echo "===== ${f#"$OUT"/retest.d/} (stdout, then stderr without the CuTe DSL warnings)"
  cat "$f"
  grep -v generate_mlir_function_types "${f%.out}.err" | tail -40
done > "$OUT/retest-logs.txt"
rm -rf "$OUT/retest.d"
cat "$OUT/retest.txt"
