"""``python -m attnbook``: the command line (see :mod:`attnbook.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m attnbook"))
