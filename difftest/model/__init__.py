"""What a test case is: the Problem, its memory layouts, a kernel's Capability, the inputs drawn for a
Problem and the Outputs a kernel hands back, and the profiles (how large a drawn Problem may get, with each
kind of run's budgets). Everything else builds on these."""
