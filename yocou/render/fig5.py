"""fig5: thin entry point of :mod:`yocou.render.scaling` (``python -m yocou.render.fig5 ...``)."""

import sys

from .scaling import main

if __name__ == "__main__":
    sys.exit(main(["fig5", *sys.argv[1:]]))
