# Source this on the device machine: unpacks whichever bundles were carried in .device/
# (tileops into its own folder, it pins tilelang 0.1.12) and sets the environment.
# Usage: source scripts/device/setup.sh
set +e
mkdir -p /tmp/site /tmp/tileops_site
for b in fa4 fa3 tilelang; do
  if [ -f .device/$b.tar.xz ] && [ ! -f /tmp/site/.unpacked-$b ]; then
    tar -C /tmp/site -xJf .device/$b.tar.xz && touch /tmp/site/.unpacked-$b
  fi
done
if [ -f .device/tileops.tar.xz ] && [ ! -f /tmp/tileops_site/.unpacked ]; then
  tar -C /tmp/tileops_site -xJf .device/tileops.tar.xz && touch /tmp/tileops_site/.unpacked
fi
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
export DIFFTEST_TILEOPS_SITE=/tmp/tileops_site
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p ${OUT:-/tmp/out}
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 - <<'PY'
import importlib, torch
print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version(), "gpus", torch.cuda.device_count())
from importlib.metadata import version
for m in ("triton", "jax", "jaxlib", "flash-attn-4", "nvidia-cutlass-dsl", "quack-kernels", "dew-flash-attn-cu13",
          "tilelang", "apache-tvm-ffi", "hypothesis", "pytest"):
    try: print(m, version(m))
    except Exception as e: print(m, "missing")
PY
  ls /tmp/tileops_site 2>/dev/null | grep -i dist-info | tr '\n' ' '; echo
} > ${OUT:-/tmp/out}/env.txt 2>&1
cat ${OUT:-/tmp/out}/env.txt
