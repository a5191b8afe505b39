"""``python -m scheduler``: the same as the ``dynamic-scheduler`` command."""

from scheduler.cli import main

raise SystemExit(main())
