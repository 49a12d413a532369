"""One ``difftest run``: its folder, resumable; campaigns side by side (lanes); CPU threads; kernels
prebuilt before the campaigns start."""
