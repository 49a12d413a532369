"""Running a kernel: the adapter protocol and registry, the isolated worker process a kernel runs
in, clean interruption, and the per-phase timer."""
