"""``python -m yocou.results.audit``: the same as ``yocou audit`` (see :mod:`yocou.results.audit.report`)."""

from yocou.results.audit.report import main

raise SystemExit(main())
