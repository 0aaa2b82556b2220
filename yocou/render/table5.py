"""table5: thin entry point of :mod:`yocou.render.downstream` (``python -m yocou.render.table5 ...``)."""

import sys

from .downstream import main

if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main, ["table5", *sys.argv[1:]]))
