"""table2: thin entry point of :mod:`yocou.render.downstream` (``python -m yocou.render.table2 ...``)."""

import sys

from .downstream import main

if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main, ["table2", *sys.argv[1:]]))
