#!/usr/bin/env bash
# H200 call K (2026-12-02, session 4): (1) issue 27's last variant short of 5,000 nightly cases,
# fp8-tensor-core-accumulator, on the host's CPU cores with the GPU hidden (the model is 2.3x faster
# since bf9602c); (2) the cuDNN FP8 dQ/dK class of results/fp8.md without difftest
# (fp8_dq_triage.py: the zero pattern, larger sequences, determinism, unit scales).
set -u
T0=$(date +%s)
D=.device/callK
mkdir -p /tmp/site /tmp/o/variants
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit) nproc: $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('hypothesis',):
    print(m, version(m))"; } > $OUT/env.txt 2>&1
VB=${VB:-450}
NV=${NV:-$(( $(nproc) - 2 ))}
for i in $(seq 1 $NV); do
  ( CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout $((VB+70)) python3 -m difftest variants \
      --only fp8-tensor-core-accumulator --cases 30000 --per-variant-budget $VB --shrink-budget 20 \
      --out-dir /tmp/o/variants/$i > /tmp/o/variants/v-$i.log 2>&1; echo "variant $i exit $?" >> /tmp/o/exits.txt ) &
done
( PYTHONPATH=/tmp/site timeout 300 python3 results/h200/fp8_dq_triage.py > $OUT/fp8_dq_triage.log 2>&1
  echo "fp8_dq_triage exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt $OUT/env.txt
grep -v Warning $OUT/fp8_dq_triage.log | cut -c1-300 | head -150
python3 -m difftest variants --from-logs /tmp/o/variants/*/*.jsonl | cut -c1-200
cd /tmp/o && tar -cJf $OUT/variants.tar.xz variants; ls -la $OUT
