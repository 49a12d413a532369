import sys

from difftest.commands.cli import main

sys.exit(main())
