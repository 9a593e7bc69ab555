"""``python -m labkit``: the ``labkit`` command."""

from labkit.tools.cli import main

raise SystemExit(main())
