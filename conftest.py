"""Root conftest: makes the repository importable when the package is not installed
and keeps Hypothesis's example database inside the work tree."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

pytest_plugins = ["pytester"]  # the plugin's own tests run pytest in a sub-session
