#!/usr/bin/env bash
# Device call 2 (2026-12-06): cuDNN 9.19 one unattended nightly (#39); the production kernels'
# unseeded gpu campaigns side by side (#40, #42); the bug reports' retests (#44); the GPU
# variant catalogue (#40). Run from the repository root; writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/site-cudnn /tmp/site-fla /tmp/site-ff
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
python3 -m zipfile -e .whl/cudnn/nvidia_cudnn_frontend-*.whl /tmp/site-cudnn
for w in .whl/retest/fla_core-*.whl .whl/retest/einops-*.whl; do python3 -m zipfile -e $w /tmp/site-fla; done
python3 -m zipfile -e .whl/retest/fastflash_attention-*.whl /tmp/site-ff
cp .device/example_gqa_bwd.py /tmp/example_gqa_bwd.py
export PYTHONPATH=/tmp/site:/tmp/site-cudnn:/tmp/site-fla PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('nvidia-cudnn-frontend','tilelang','dew-flash-attn-cu13','fla-core','triton','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
BUDGET=${BUDGET:-360}
camp() {  # camp KERNEL PROFILE
  ( timeout $((BUDGET+60)) python3 -m difftest run -k $1 -p $2 --device cuda --time-budget $BUDGET --db none \
      --out /tmp/o/$1 -q > /tmp/o/$1.log 2>&1; echo "$1 exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
}
camp cudnn nightly
for k in sdpa-math sdpa-efficient sdpa-flash fa3 flex tilelang-det fla-attn; do camp $k gpu; done
( OUT=/tmp/o/retest CUDNN_SITE=/tmp/site-cudnn FLA_SITE=/tmp/site-fla FASTFLASH_SITE=/tmp/site-ff SITE=/tmp/site \
    TILELANG_EXAMPLE=/tmp/example_gqa_bwd.py DEADLINE_S=380 bash results/bugs/retest_gpu.sh > /tmp/o/retest.log 2>&1
  echo "retest exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
[ -f .gpu/call2-extra.sh ] && ( bash .gpu/call2-extra.sh > /tmp/o/extra.log 2>&1; echo "extra exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for k in cudnn sdpa-math sdpa-efficient sdpa-flash fa3 flex tilelang-det fla-attn; do echo "== $k"
  grep -E "^$k: |finding|configuration pairs|unexplained|framework overhead" /tmp/o/$k.log | cut -c1-240 | head -14; done
cut -c1-260 /tmp/o/retest/retest.txt 2>/dev/null; tail -30 /tmp/o/extra.log 2>/dev/null
cd /tmp/o
find . -name "*.cases.jsonl" -size +30M -delete
tar -cJf $OUT/call2-logs.tar.xz *.log exits.txt retest */report.json extra 2>/dev/null; ls -la $OUT
