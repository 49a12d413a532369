"""Show, without a GPU, how TileLang addresses dQ under example_gqa_bwd.py's make_dq_layout:
lowers flashattn_bwd_postprocess (and, with --bwd, flashattn_bwd) for a seq_len that is not a
multiple of 8 to CUDA source (tilelang.lower, target sm_90; no nvcc, no device) and prints the
statements that index dQ. Tested with tilelang 0.1.15 on a CPU-only machine.

    python3 lower_dq_kernels.py /path/to/example_gqa_bwd.py [--bwd] [B H S D]

For B=2 H=3 S=65 D=192 the postprocess reads dQ with a batch stride of 41472 = 72*3*192 floats
(ceil(65/8)*8 = 72 rows) while dQ_out, and the caller's float32 dQ, use 37440 = 65*3*192:
batch 1's last rows are read from past the end of the 74880-float dQ tensor.
"""
import importlib.util
import re
import sys

import tilelang
from tvm.target import Target


def main():
    args = [a for a in sys.argv[1:] if a != "--bwd"]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    path, dims = args[0], [int(x) for x in args[1:5]] or [2, 3, 65, 192]
    b, h, s, d = dims
    spec = importlib.util.spec_from_file_location("seed004_example_gqa_bwd", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = [("flashattn_bwd_postprocess", (b, h, s, d))]
    if "--bwd" in sys.argv:
        calls.append(("flashattn_bwd", (b, h, s, d, d, False, 64, 32, 1)))
    print(f"dQ tensor: [{b}, {s}, {h}, {d}] float32 = {b * s * h * d} floats, batch stride {s * h * d}; "
          f"make_dq_layout rows per batch: {-(-s // 8) * 8} -> batch stride {-(-s // 8) * 8 * h * d}")
    target = Target({"kind": "cuda", "arch": "sm_90"})
    for fn, a in calls:
        with target:
            src = tilelang.lower(getattr(mod, fn).get_tir(*a), target=target).kernel_source
        print(f"--- {fn}{a}")
        for line in src.splitlines():
            if re.search(r"\bdQ\[", line):
                print(line.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
