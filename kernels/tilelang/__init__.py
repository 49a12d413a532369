"""Our own TileLang attention kernels: one source for the CPU (target "c", CI)
and the H200 (target "cuda").

source.py      kernels: forward (O, LSE), Delta/dSink preprocess, main backward (dK, dV,
               dQ atomic or per-key-block partials), dQ postprocess, dSink reduction
cache.py       in-process compile cache over TileLang's disk cache; build/hit counters
adapter.py     adapters ``tilelang`` (atomic dQ) and ``tilelang-det`` (deterministic dQ)
mutants.py     fault-injected variants of the same kernels, merged into kernels/mutants.py
variants.py    correct variants (other tiles, atomic dQ), merged into kernels/variants.py
warm.py        parallel pre-build of every configuration into the disk cache
cuda_check.py  lower + nvcc-compile the CUDA build for sm_90 on a machine without a GPU
bench.py       CUDA-event backward timing on the seed shapes next to FA3/FA4

Nothing here imports tilelang at package import time.
"""
