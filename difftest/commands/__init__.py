"""The command line: one module per subcommand (``HELP``, ``add_arguments``, ``command``), the
dispatcher (cli), the options several share (options), and the new-adapter scaffold."""
