"""Correct variants of our TileLang kernels (real TileLang code, compiled like the clean
kernels), merged into the variant catalogue (``kernels/variants.py``) where tilelang imports.

Our TileLang kernel already makes the FlashAttention choices the blockwise variants model
one at a time (Delta from the O stored in the input dtype, exp2 with the folded scale, P
from the stored LSE, float32 accumulators), so its variants are the ones a TileLang author
changes by hand: the tile shape (every accumulation order: the online softmax over key
tiles, dK/dV over query tiles, dQ's partials over key tiles) and the dQ strategy (atomic
adds of every key tile's partial into one float32 buffer, or per-key-tile partials reduced
afterwards). Each is a correct kernel: every verdict difftest gives it must pass.
"""

from difftest.kernels.variants import Variant

from .adapter import TileLangAttention, default_device

# (name, dQ mode, tiles per device, the choice, which real kernels make it)
_SPECS = (
    (
        "tl-tiles-16x64",
        "deterministic",
        {"cpu": dict(block_m=16, block_n=64), "cuda": dict(block_m=64, block_n=128)},
        "TileLang kernel with short query tiles and long key tiles: other online-softmax, dK/dV and dQ "
        "accumulation orders than the shipped 32 x 32 (CPU) / 64 x 64 (CUDA)",
        "tile shapes TileLang authors autotune (FA3's 128 x 64 / 64 x 128 bwd tiles)",
    ),
    (
        "tl-atomic-dq-64x16",
        "atomic",
        {"cpu": dict(block_m=64, block_n=16), "cuda": dict(block_m=64, block_n=32)},
        "TileLang kernel with dQ by atomic float32 adds of every key tile's partial (many short partials: "
        "key tiles of 16) instead of per-key-tile partials reduced in order",
        "TileLang's upstream GQA backward example, FA2/FA3 atomic dQ",
    ),
)


def _factory(name: str, dq_mode: str, tiles: dict, description: str):
    def make():
        a = TileLangAttention(dq_mode, name=f"variant:{name}", tiles=tiles[default_device()])
        a.spec = f"variant:{name}"  # the registry key reproducers and isolated workers use
        a.description = description
        return a

    make.__name__ = f"make_{name.replace('-', '_')}"
    return make


# deterministic=True: on the CPU TileLang's atomics run serially; on CUDA the capability of
# the atomic build says deterministic=False and the campaign reads that from the adapter.
VARIANTS: dict[str, Variant] = {
    name: Variant(name, models, desc, _factory(name, mode, tiles, desc), True)
    for name, mode, tiles, desc, models in _SPECS
}
