#!/usr/bin/env bash
# H200 call F (2026-12-02, session 2): FA4 4.0.0b36 race stress (`difftest stress`: fa4-fast, whose
# dQ uses atomics, then fa4 with deterministic=True) and compute-sanitizer on an FA4 finding's
# reproducer (`difftest sanitize`).
set -u
T0=$(date +%s)
D=.device/callF
mkdir -p /tmp/site /tmp/o
for b in $D/*.tar.xz; do tar -C /tmp/site -xJf $b; done
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)"
  python3 -c "from importlib.metadata import version; print('flash-attn-4', version('flash-attn-4'))"; } > $OUT/env.txt 2>&1
( for k in fa4-fast fa4; do
    timeout 170 python3 -m difftest stress -k $k --device cuda --reps 100 --batch 60 --load 1 --head-dim 128 \
        --dtype bfloat16 --out /tmp/o/stress-$k > /tmp/o/stress-$k.log 2>&1; echo "stress $k exit $?" >> /tmp/o/exits.txt
  done ) &
( SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer | head -1)
  r=results/bugs/fa4/hdim8-zero-grads.json
  timeout 330 python3 -m difftest sanitize $r --timeout 75 --sanitizer $SAN > /tmp/o/sanitize-hdim8.log 2>&1
  echo "sanitize exit $?" >> /tmp/o/exits.txt; cp ${r%.json}.sanitizer.json /tmp/o/ ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt $OUT/env.txt
grep -v "UserWarning\|exe_args" /tmp/o/stress-*.log | tail -30 | cut -c1-300
tail -8 /tmp/o/sanitize-hdim8.log | cut -c1-300
cd /tmp/o && tar -cJf $OUT/callF.tar.xz *.log *.txt *.json stress-* 2>/dev/null; ls -la $OUT
