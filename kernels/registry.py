"""Built-in kernels, registered by name as 'module:attr' paths so nothing heavy
(tilelang, flash_attn, CUDA) is imported until a kernel is asked for."""

from difftest.adapter import register

BUILTIN = {
    "torch-blockwise": "kernels.blockwise:BlockwiseAttention",
    "sdpa-cpu-math": "kernels.sdpa_cpu:SdpaCpuMath",
    "sdpa-cpu-flash": "kernels.sdpa_cpu:SdpaCpuFlash",
}

for _name, _path in BUILTIN.items():
    register(_name, _path)
