"""``python -m merkle_memory``: the same command line as ``merkle-memory``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
