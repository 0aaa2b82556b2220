"""fig6: thin entry point of :mod:`yocou.render.scaling` (``python -m yocou.render.fig6 ...``)."""

import sys

from .scaling import main

if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main, ["fig6", *sys.argv[1:]]))
