#!/usr/bin/env bash
# Device call A (2026-12-06, session 5): FA4 time travel after compile-aware hunting (#39): one
# unattended nightly per beta, sharded over the host's cores (b25/b29/b30: 4 shards, b40: 3),
# every shard BUDGET s on one GPU shared by all, the shards joined by `difftest merge`. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
BUDGET=${BUDGET:-470}
for v in 25 29 30 40; do
  N=4; [ $v = 40 ] && N=3
  P=/tmp/site:$DSL:$PWD; [ $v != 36 ] && P=/tmp/fa4b$v:$P
  for ((i=0; i<N; i++)); do
    ( PYTHONPATH=$P timeout $((BUDGET+45)) python3 -m difftest run -k fa4 -p nightly --device cuda --shard $i/$N \
        --time-budget $BUDGET --db none --out /tmp/o/b$v-$i -q 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/b$v-$i.log
      echo "b$v shard $i/$N exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
  done
done
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; sort /tmp/o/exits.txt
for v in 25 29 30 40; do
  PYTHONPATH=/tmp/site:$DSL:$PWD python3 -m difftest merge /tmp/o/b$v-*/report.json -o /tmp/o/b$v.json > /tmp/o/merge-b$v.log 2>&1 || tail -2 /tmp/o/merge-b$v.log
  cp /tmp/o/b$v.json $OUT/report-b$v.json 2>/dev/null
  python3 - /tmp/o/b$v.json b$v <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["campaigns"]:
    pr = c.get("coverage", {}).get("pairs", {})
    fs = [f for f in c.get("findings", []) if not f.get("known")]
    print(f"== {sys.argv[2]}: {len(c.get('cases', []))} cases, pairs {pr.get('covered')}/{pr.get('claimed')}, "
          f"{len(fs)} findings, unexplained {c.get('unexplained')}")
    for f in fs:
        s = f.get("signature", {})
        print("  -", (s.get("describe") or str(s))[:260])
PY
done
for f in /tmp/o/b*-*.log; do echo "-- $f"; grep -E "^fa4|configuration pairs|unexplained" $f | cut -c1-200 | head -4; done
cd /tmp/o && tar -cJf $OUT/callA-logs.tar.xz *.log exits.txt; ls -la $OUT
