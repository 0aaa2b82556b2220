"""fig5: thin entry point of :mod:`yocou.render.scaling` (``python -m yocou.render.fig5 ...``)."""

import sys

from .scaling import main

if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main, ["fig5", *sys.argv[1:]]))
