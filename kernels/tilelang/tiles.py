"""Our TileLang kernels' tiles (the adapter's capability and the prebuild's configurations),
and the names of their dQ modes and mutants: what the adapter declares without TileLang
imported (``difftest run`` forks its lanes from a process that never imports it; the lane
of a TileLang campaign does)."""

DQ_MODES = ("atomic", "deterministic")
MUTANTS = ("", "mask_off_by_one", "dsink_sign", "tail_block_skipped", "gqa_head_map")

# Block sizes and launch shapes per device. The CPU uses small tiles (cheap tails, small
# CI shapes); the GPU uses 64x64 tiles.
TILES = {
    "cpu": dict(block_m=32, block_n=32, fwd_threads=128, bwd_threads=128, stages=1),
    "cuda": dict(block_m=64, block_n=64, fwd_threads=128, bwd_threads=256, stages=1),
}

# g++ optimisation flags of every CPU build (source.py; pch.py builds its header with them)
CPU_FLAGS = ("-O2",)
