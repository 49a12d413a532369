"""``python -m difftest``: the command line (difftest/commands/cli.py)."""

from difftest.commands.cli import entry

if __name__ == "__main__":
    entry()
