"""python -m mxfp8: the command line (python -m mxfp8 --help; python -m mxfp8 demo --help)."""
import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
