from __future__ import annotations

from fedqueue.cli import main

raise SystemExit(main())
