"""What a test case is: the Problem, its memory layouts, a kernel's Capability, the inputs drawn for a
Problem and the Outputs a kernel hands back. Everything else builds on these."""
