#!/usr/bin/env bash
# H200: race stress (difftest stress) on the kernels that use atomics or claim determinism, then
# compute-sanitizer (difftest sanitize) on the reproducer JSONs given as arguments.
#   OUT=/path bash results/h200/stress-sanitize.sh [REPRO.json ...]
# Env: D (the device bundle, as gpu-2026-12-02a.sh: *.tar.xz site packages, cudnn wheel, meta/),
# REPS (100), BATCH (60), LOAD (1), STRESS_TIMEOUT (900 s per kernel), SAN_TIMEOUT (1800 s per tool).
set -u
OUT=${OUT:?set OUT to a results folder}
D=${D:-.device/callA}
mkdir -p /tmp/site "$OUT"
for b in "$D"/*.tar.xz; do [ -e "$b" ] && tar -C /tmp/site -xJf "$b"; done
for w in "$D"/nvidia_cudnn_frontend-*.whl; do [ -e "$w" ] && python3 -m zipfile -e "$w" /tmp/site; done
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
REPS=${REPS:-100} BATCH=${BATCH:-60} LOAD=${LOAD:-1}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.txt"
for k in tilelang fa4-fast tileops-gqa; do
  timeout "${STRESS_TIMEOUT:-900}" python3 -m difftest stress -k "$k" --device cuda --reps "$REPS" \
      --batch "$BATCH" --load "$LOAD" --out "$OUT/stress-$k" > "$OUT/stress-$k.log" 2>&1
  echo "== stress $k: exit $?"
  grep -E "^(problem|b[0-9]|note)" "$OUT/stress-$k.log"   # reps/s, calls/s, load ops, what differed
  grep -E "FAILED|error" "$OUT/stress-$k.log" | head -5
done
if [ $# -gt 0 ]; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
  for r in "$@"; do
    timeout $((4 * ${SAN_TIMEOUT:-1800} + 120)) python3 -m difftest sanitize "$r" --timeout "${SAN_TIMEOUT:-1800}" \
        ${SAN:+--sanitizer "$SAN"} > "$OUT/sanitize-$(basename "$r" .json).log" 2>&1
    echo "== sanitize $r: exit $?"; cat "$OUT/sanitize-$(basename "$r" .json).log"
    cp "${r%.json}.sanitizer.json" "$OUT/" 2>/dev/null
  done
fi
ls -la "$OUT"
