"""Our TileLang kernels' tiles (the adapter's capability and the prebuild's configurations)."""

# Block sizes and launch shapes per device. The CPU uses small tiles (cheap tails, small
# CI shapes); the GPU uses 64x64 tiles.
TILES = {
    "cpu": dict(block_m=32, block_n=32, fwd_threads=128, bwd_threads=128, stages=1),
    "cuda": dict(block_m=64, block_n=64, fwd_threads=128, bwd_threads=256, stages=1),
}
