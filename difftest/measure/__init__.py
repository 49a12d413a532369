"""Evidence about difftest itself: calibration of the budgets, detection power (mutants), the fixed
grid baseline, and kernel timing (bench)."""
