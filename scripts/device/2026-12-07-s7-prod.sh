#!/usr/bin/env bash
# Device call (2026-12-07, session 7): issue 40's production kernels short of 2,000 unseeded `gpu` cases
# (sdpa-math after the 12-06 fix, flex: compile-bound), and the history-dependent reproducer's `before`
# (021027b) on cuDNN 9.19: two unattended nightly shards, then every reproducer with a `before` replayed with
# `difftest repro` as written (P first) and with `before` removed (alone), each in a fresh process.
# Carry: .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu. Writes $OUT/prod.txt, logs.
set -u
. scripts/device/cudnn-setup.sh
B=${BUDGET:-300}
go() { local name=$1; shift
  ( timeout $((B+60)) python3 -m difftest run --device cuda --time-budget $B --db none -q "$@" --out $W/$name \
      > $W/$name.log 2>&1; echo "$name exit $?" >> $W/exits.txt ) & }
[ -z "${ONLY_CUDNN:-}" ] && for i in 0 1; do go math$i -p gpu -k sdpa-math --shard $i/2; done  # ONLY_CUDNN=1: not these
[ -n "${FLEX:-}" ] && for i in 0 1 2; do go flex$i -p gpu -k flex --shard $i/3; done  # FLEX=1: flex too
N=${CUDNN_SHARDS:-2}  # cuDNN nightly shards
for i in $(seq 0 $((N-1))); do go cudnn$i -p nightly -k cudnn --shard $i/$N; done
wait
{ sort $W/exits.txt
  for n in $([ -z "${ONLY_CUDNN:-}" ] && echo math0 math1) ${FLEX:+flex0 flex1 flex2} $(seq -f "cudnn%g" 0 $((N-1))); do
    python3 scripts/device/summarise_reports.py $W/$n/report.json $n | cut -c1-400
    grep -E "time split|framework overhead" $W/$n.log | head -2
  done
  echo "== history-dependent reproducers (before), replayed"
  for f in $(grep -l '"before"' $W/cudnn*/runs/*/repro/*.json 2>/dev/null | head -${REPLAYS:-3}); do
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('before'); json.dump(d, open(sys.argv[2],'w'))" $f ${f%.json}-alone.json
    for k in 1; do
      timeout 120 python3 -m difftest repro $f > $W/r.log 2>&1; a=$?
      timeout 120 python3 -m difftest repro ${f%.json}-alone.json > $W/r2.log 2>&1; b=$?
      echo "$(basename $f) try $k: with before exit $a, alone exit $b; $(grep -o 'replayed after.*' $W/r.log | head -1 | cut -c1-160)"
    done
  done; } 2>&1 | tee $OUT/prod.txt
(cd $W && tar -cJf $OUT/prod-logs.tar.xz *.log exits.txt $(ls cudnn*/runs/*/repro/*.json 2>/dev/null) \
  $(ls */report.json 2>/dev/null) $(find . -name "*.cases.jsonl" 2>/dev/null))
