"""python -m mxfp8 demo: the whole hand-off on a built-in weight set, checked bit for bit."""
import sys

from ._demo import main

if __name__ == "__main__":
    sys.exit(main())
