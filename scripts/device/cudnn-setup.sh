# Sourced by the cuDNN device calls (scripts/device/2026-12-07-s6-*.sh, -s7-*.sh): a private work folder $W
# (mktemp: never a fixed /tmp path a warm machine kept), the cuDNN frontend bundle and covertable on
# PYTHONPATH, difftest installed from the carried tree, and the call's first line in $OUT/env.txt.
# Carry: .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu.
W=$(mktemp -d)
tar -C $W -xJf .device/cudnn.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl $W
export PYTHONPATH=$W:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > $W/pip.log 2>&1 || tail -5 $W/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } | tee $OUT/env.txt
