"""The command line: parsing (cli), input checks (argcheck), and the new-adapter scaffold."""
