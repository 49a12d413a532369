"""Built-in kernels, registered by name as 'module:attr' paths so nothing heavy
(tilelang, flash_attn, CUDA) is imported until a kernel is asked for."""

from difftest.adapter import register

BUILTIN = {
    "torch-blockwise": "kernels.blockwise:BlockwiseAttention",
    "sdpa-cpu-math": "kernels.sdpa_cpu:SdpaCpuMath",
    "sdpa-cpu-flash": "kernels.sdpa_cpu:SdpaCpuFlash",
    "sdpa-flash": "kernels.sdpa_cuda:flash",
    "sdpa-efficient": "kernels.sdpa_cuda:efficient",
    "sdpa-cudnn": "kernels.sdpa_cuda:cudnn",
    "sdpa-math": "kernels.sdpa_cuda:math_backend",
    "flex": "kernels.flex:FlexAdapter",
    "flex-gqa": "kernels.flex:gqa",
    "fa4": "kernels.fa4:deterministic",
    "fa4-fast": "kernels.fa4:fast",
    "fa3": "kernels.fa3:adapter",
    "tileops-gqa": "kernels.tileops:gqa",
    "tileops-mla": "kernels.tileops:mla",
    "tilelang": "kernels.tilelang.adapter:atomic",
    "tilelang-det": "kernels.tilelang.adapter:deterministic",
}

for _name, _path in BUILTIN.items():
    register(_name, _path)
