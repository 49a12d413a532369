#!/usr/bin/env bash
# Device call B (2026-12-07): FA4 on the GPU. (1) fa4-sparse, the block-sparse adapter's first GPU run, on
# 4.0.0b40 (issue 43: >= 1,000 cases) and on 4.0.0b25 (the block-sparse backward's missing wait, NaN, was fixed
# in b26: time travel); (2) FA4 time travel on b25 with the engine after merge's recount and the absorbed
# kernel errors (issue 39: the PackGQA head-dim-88 ratio-3 build error, unexplained counts). All side by side.
# (3) every reproducer the b25 fa4-sparse campaign wrote, bisected over b25, b26, b40 (`difftest bisect`).
# Carry: .device/fa4.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/fa4b25, .whl/fa4b26, .whl/fa4b40, .gpu. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 26 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  for v in 25 40; do PYTHONPATH=/tmp/fa4b$v:$PYTHONPATH python3 -c "from importlib.metadata import version; print('fa4 b$v', version('flash-attn-4'), 'cutlass-dsl', version('nvidia-cutlass-dsl'))"; done
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-400}
bg() { local name=$1 v=$2; shift 2
  ( PYTHONPATH=/tmp/fa4b$v:/tmp/site:$DSL:$PWD timeout $((B+60)) "$@" 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/$name.log
    echo "$name exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
for i in 0 1 2 3; do bg sp40-$i 40 python3 -m difftest run -k fa4-sparse -p gpu --device cuda --shard $i/4 --time-budget $B --db none -q --out /tmp/o/sp40-$i; done
for i in 0 1; do bg sp25-$i 25 python3 -m difftest run -k fa4-sparse -p gpu --device cuda --shard $i/2 --time-budget $B --db none -q --out /tmp/o/sp25-$i; done
for i in 0 1 2 3 4; do bg b25-$i 25 python3 -m difftest run -k fa4 -p nightly --device cuda --shard $i/5 --time-budget $B --db none -q --out /tmp/o/b25-$i; done
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; sort -t' ' -k5 -n /tmp/o/exits.txt
for k in sp40 sp25 b25; do
  python3 -m difftest merge /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1; echo "== merged $k"; tail -3 /tmp/o/merge-$k.log | cut -c1-300
  python3 - /tmp/o/$k.json $k <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no merged report:", e); raise SystemExit
for c in d["campaigns"]:
    pr = c.get("coverage", {}).get("pairs", {})
    fs = [f for f in c.get("findings", []) if not f.get("known")]
    print(f"== {sys.argv[2]}: {len(c.get('cases', []))} cases, pairs {pr.get('covered')}/{pr.get('claimed')}, "
          f"{len(fs)} findings, unexplained {c.get('unexplained')}")
    for f in fs:
        s = f.get("signature", {})
        print("  -", (s.get("describe") or str(s))[:300])
PY
done
# the b25 block-sparse reproducers across b25 -> b26 (the missing-wait fix, flash-attention#2756) -> b40
n=0; for f in /tmp/o/sp25-*/repro/*.json; do [ -f "$f" ] || continue; n=$((n+1)); [ $n -gt 4 ] && break
  echo "== bisect $f"; timeout 90 python3 -m difftest bisect "$f" --versions /tmp/fa4b25 /tmp/fa4b26 /tmp/fa4b40 --json /tmp/o/bisect-$n.json 2>&1 | tail -8 | cut -c1-300
  cp "$f" /tmp/o/bisect-$n.repro.json; done
for f in /tmp/o/*-[0-9].log; do echo "-- $f"; grep -E "^[a-z0-9-]+: (passed|failed)|configuration pairs|unexplained|unavailable|refus" $f | cut -c1-200 | head -4; done
cd /tmp/o && mkdir -p rep && cp sp40.json sp25.json b25.json bisect-* rep/ 2>/dev/null
tar -cJf $OUT/callB-reports.tar.xz rep; tar -cJf $OUT/callB-logs.tar.xz *.log *.txt 2>/dev/null; ls -la $OUT
