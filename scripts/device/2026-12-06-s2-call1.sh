#!/usr/bin/env bash
# Device call 4 (2026-12-06, session 2): framework time per case before (30f8f82) and after,
# alone and four side by side, for sdpa-efficient, sdpa-math, tilelang-det, fa3 (#42). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/before
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
tar -C /tmp/before -xJf .device/before.tar.xz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('tilelang','dew-flash-attn-cu13','triton','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
timeout ${BENCH_S:-470} python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math -k tilelang-det -k fa3 \
    --examples ${EXAMPLES:-400} --case-budget ${CASE_BUDGET:-30} --mode both --before /tmp/before \
    --json $OUT/cases.json --markdown $OUT/cases.md > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"; tail -60 /tmp/o/bench.log | cut -c1-220
cd /tmp/o && tar -cJf $OUT/call4-logs.tar.xz *.log; ls -la $OUT
