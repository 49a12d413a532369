#!/usr/bin/env bash
# Device call (2026-12-07, session 6): the fresh-process checks of a hunt (hunt.py, signature.derive's clean) on
# cuDNN 9.19, whose d_qk > 128 / smaller d_v bug corrupts the kernel's process: three unattended short nightly
# shards side by side; per shard its findings, and the fresh checks and history-dependent findings it counted.
# Carry: .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu.
set -u
. scripts/device/cudnn-setup.sh
B=${BUDGET:-110}
for i in 0 1 2; do
  ( timeout $((B+40)) python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k cudnn \
      --shard $i/3 --out $W/c$i > $W/c$i.log 2>&1; echo "c$i exit $?" >> $W/exits.txt ) &
done
wait
cat $W/exits.txt
for i in 0 1 2; do
  echo "== shard $i"; grep -E "^  finding|fresh|history" $W/c$i.log | cut -c1-300
  python3 - $W/c$i/report.json <<'PY'
import json, sys
try:
    c = json.load(open(sys.argv[1]))["campaigns"][0]
except Exception as e:
    print("no report:", e); sys.exit()
s = c.get("settings", {})
print("cases", len(c.get("cases", [])), "fresh_checks", s.get("fresh_checks"), "history_dependent", s.get("history_dependent"))
for f in c.get("findings", []):
    print(" ", f["id"], f["hits"], f["signature"]["describe"][:240])
PY
done 2>&1 | tee $OUT/fresh.txt
(cd $W && tar -cJf $OUT/fresh-logs.tar.xz c?.log)
