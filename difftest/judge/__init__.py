"""One case's verdict: run the kernel and the references (runner), judge every output (gates,
determinism), and say where and why it failed (attribution, breakdown, triage, declaration)."""
