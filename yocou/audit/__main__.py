"""``python -m yocou.audit``: the same as ``yocou audit`` (see :mod:`yocou.audit.report`)."""

from .report import main

raise SystemExit(main())
