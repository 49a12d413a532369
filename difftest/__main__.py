"""``python -m difftest``: the command line (difftest/commands/cli.py)."""

import sys

from difftest.commands.cli import main

if __name__ == "__main__":
    sys.exit(main())
