"""``python -m attnbook``: the command line (see :mod:`attnbook.cli`).

Ctrl-C and SIGTERM are recorded, not acted on, until the imports are done (the package's
first line guarded them: :mod:`attnbook._signals`); :func:`attnbook.cli.main` then acts on
one that came meanwhile (status 130 or 143, one line) and on any later one.
"""

import sys

from . import _signals

_signals.guard()  # (already guarded by the package's first line: then a no-op)

from .cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="python -m attnbook"))
