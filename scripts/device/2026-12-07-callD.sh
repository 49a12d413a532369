#!/usr/bin/env bash
# Device call D (2026-12-07, the last of the session's device time after call A's machine was taken back):
# every draft report's script (issue 44) in two chains (scripts/device/2026-12-07-drafts.sh), nothing else.
# Carry: .whl/retest, .whl/jvp, .whl/hunt, .gpu. Writes $OUT/callD-drafts.tar.xz and $OUT/env.txt.
set -u
T0=$(date +%s)
mkdir -p /tmp/o
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} > $OUT/env.txt 2>&1; cat $OUT/env.txt
bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts prep
timeout ${CHAIN_S:-190} bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts 1 &
timeout ${CHAIN_S:-190} bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts 2 &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/drafts/drafts.txt
for f in /tmp/o/drafts/*.out; do echo "== ${f##*/}"; tail -5 $f | cut -c1-220; done
tar -C /tmp/o -cJf $OUT/callD-drafts.tar.xz drafts
