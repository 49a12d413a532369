# Issue 11 parts 4-5 on a 2-GPU machine (nvidia-h200-x2), after `source scripts/device/setup.sh`:
#  1. pytest --difftest-kernel under xdist with one GPU per worker: each kernel's campaign
#     runs once, on one worker, pinned to that worker's GPU (records say which);
#  2. two shards of one seeded campaign side by side, one per GPU, merged, then gated
#     against themselves (must pass) and rendered as HTML.
# Writes everything under $OUT; prints the per-kernel worker/GPU and the gate's last line.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/pytest" "$OUT/shards"
python3 -m pytest -p no:cacheprovider -n 2 --difftest-gpu-per-worker \
  --difftest-kernel sdpa-flash --difftest-kernel flex \
  --difftest-profile gpu --difftest-max-examples 10 --difftest-seed 1 \
  --difftest-out "$OUT/pytest" --junitxml "$OUT/pytest/junit.xml" -q 2>&1 | tail -25
python3 - "$OUT/pytest" <<'PY'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("pytest-campaigns/*/*.json")):
    r = json.loads(p.read_text())
    print(f"{r['kernel']}: {r['status']}, {r['examples']} cases, worker {r['pytest_worker']}, "
          f"CUDA_VISIBLE_DEVICES={r['cuda_visible_devices']}")
PY
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=$i python3 -m difftest run --device cuda -p gpu -k sdpa-flash --seed 7 \
    --max-examples 40 --shard $i/2 --out "$OUT/shards/s$i" -q > "$OUT/shards/s$i.log" 2>&1 &
done
wait
tail -n 2 "$OUT/shards/s0.log" "$OUT/shards/s1.log"
python3 -m difftest merge "$OUT/shards/s0/report.json" "$OUT/shards/s1/report.json" -o "$OUT/shards/merged.json"
python3 -m difftest gate --baseline "$OUT/shards/merged.json" --candidate "$OUT/shards/merged.json" \
  --junit "$OUT/shards/junit.xml" --html "$OUT/shards/gate.html" | tail -1
