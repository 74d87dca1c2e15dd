"""python -m mxfp8: the command line (python -m mxfp8 --help; python -m mxfp8 demo --help)."""
import os
import sys

from ._cli import main

if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m mxfp8 info | head`: the reader left; no traceback for that
        # As the Python docs advise: stdout to devnull, so the flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
