#!/usr/bin/env bash
# H200 call C (2026-12-02): cuDNN's unattended nightly hunt again under the root-gate / race
# signatures (04c08c0), and >= 800-case unseeded gpu campaigns of fa3 and tilelang-det (two
# shards each, merged) and sdpa-math under the shipped verdicts.
set -u
T0=$(date +%s)
D=${D:-.device/callC}
mkdir -p /tmp/site /tmp/o
for b in $D/*.tar.xz; do tar -C /tmp/site -xJf $b; done
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
echo "date: $(date -u +%FT%TZ) commit: $(cat .device/commit 2>/dev/null)" > $OUT/env.txt
BUDGET=${BUDGET:-390}
run() {  # name kernel profile [extra args]
  local name=$1 k=$2 prof=$3; shift 3
  ( timeout $((BUDGET+110)) python3 -m difftest run -k $k -p $prof --device cuda --max-examples 5000 \
      --time-budget $BUDGET --shrink-budget 20 --out /tmp/o/$name --db none -q "$@" > /tmp/o/$name.log 2>&1
    echo "$name exit $?" >> /tmp/o/exits.txt ) &
}
run cudnn cudnn nightly
run sdpa-math sdpa-math gpu
run fa3-1 fa3 gpu --shard 1/2 --threads 2
run fa3-2 fa3 gpu --shard 2/2 --threads 2
run tl-1 tilelang-det gpu --shard 1/2 --threads 2
run tl-2 tilelang-det gpu --shard 2/2 --threads 2
wait
for k in fa3 tl; do python3 -m difftest merge /tmp/o/$k-1/report.json /tmp/o/$k-2/report.json -o /tmp/o/$k-merged.json > /tmp/o/$k-merge.log 2>&1; echo "merge $k exit $?" >> /tmp/o/exits.txt; done
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt
for k in cudnn sdpa-math fa3-1 fa3-2 tl-1 tl-2; do echo "== $k"; grep -v "claims:" /tmp/o/$k.log | tail -22; done
tail -5 /tmp/o/fa3-merge.log /tmp/o/tl-merge.log
cd /tmp/o && find . -name "*.cases.jsonl" -size +20M -delete; tar -cJf $OUT/callC.tar.xz --exclude="*.html" . 2>/dev/null; ls -la $OUT
