#!/usr/bin/env bash
# H200: the cudnn-fp8 adapter (cuDNN sdpa_fp8 / sdpa_fp8_backward) for the first time.
# Usage, from the repository root on the device machine, with the cudnn-frontend wheel in $D:
#   D=.device/call1 META=.device/call1/meta OUT=/path/for/results bash results/h200/fp8-smoke.sh
# (a) versions, (b) a standalone call on fixed shapes, errors against the float64 truth of the
# dequantised inputs and against the FP8 yardstick, (c) the gpu campaign of cudnn-fp8.
set -u
D=${D:-.device/call1}
META=${META:-$D/meta}
OUT=${OUT:-/tmp/fp8-out}
mkdir -p /tmp/site "$OUT"
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/$META PYTHONUNBUFFERED=1
# (a) versions
timeout 60 python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda,
      'cudnn backend', torch.backends.cudnn.version(), 'gpu', torch.cuda.get_device_name(0))
import cudnn; print('cudnn-frontend', cudnn.__version__, 'backend', cudnn.backend_version())
" 2>&1 | tee $OUT/env.txt
# which spec reaches the adapter: the entry point when META carries it, else module:attr
K=cudnn-fp8
python3 -c "from difftest.execute.adapter import get; get('cudnn-fp8')" 2>/dev/null || K=difftest.kernels.cudnn_fp8:adapter
echo "adapter spec: $K" | tee -a $OUT/env.txt
# (b) standalone calls on fixed shapes
timeout 300 python3 - <<'PY' 2>&1 | tee $OUT/standalone.txt
import torch
from difftest.kernels.cudnn_fp8 import CudnnFp8Adapter
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import chunked_reference, fp8_reference
k = CudnnFp8Adapter()
print("available:", k.available())
shapes = [dict(seqlen_q=128, seqlen_k=128), dict(seqlen_q=128, seqlen_k=256, causal=True, align="top_left"),
          dict(batch=2, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=1),
          dict(seqlen_q=256, seqlen_k=256, dtype="float8_e5m2"),
          dict(seqlen_q=128, seqlen_k=128, values="scaled", value_scale=4.0)]
for kw in shapes:
    p = Problem(**{"head_dim_qk": 128, "head_dim_v": 128, "dtype": "float8_e4m3fn", **kw})
    try:
        x = make_inputs(p, "cuda")
        got = k.run(x)
        truth, yard = chunked_reference(x, "float64"), fp8_reference(x)
        row = []
        for n in ("o", "lse", "dq", "dk", "dv"):
            t = truth.get(n).double()
            e = (got.get(n).double() - t).abs().max().item()
            r = (yard.get(n).double() - t).abs().max().item()
            row.append(f"{n}: err {e:.3g} yardstick {r:.3g} max|truth| {t.abs().max().item():.3g}")
        print(p.short(), "|", "; ".join(row))
        print("   cudnn amax", {a: round(v, 6) for a, v in k.amax.items()}, "| yardstick amax",
              {a: round(v, 6) for a, v in yard.amax.items()})
    except Exception as e:
        print(p.short(), "FAILED:", type(e).__name__, str(e)[:500])
PY
# (c) the campaign
timeout 300 python3 -m difftest run -k $K -p gpu --device cuda --max-examples 300 --time-budget 200 \
    --out $OUT/fp8 --db none -q > $OUT/campaign.log 2>&1
echo "campaign exit $?" | tee -a $OUT/campaign.log
tail -60 $OUT/campaign.log
