"""fig3: thin entry point of :mod:`yocou.render.downstream` (``python -m yocou.render.fig3 ...``)."""

import sys

from .downstream import main

if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main, ["fig3", *sys.argv[1:]]))
