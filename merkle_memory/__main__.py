"""``python -m merkle_memory``: the same command line as ``merkle-memory``.

An interrupt (Ctrl-C) while the package is still being imported ends with the command line's
own answer, ``error: interrupted`` and exit 130, not a traceback.
"""

import sys

try:
    from .cli import main
except KeyboardInterrupt:
    print("error: interrupted", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
