"""Serve the fake Gateway: ``python3 tests/fakes/gateway --port 8420 [--api-key K]``.

Also ``python3 -m fakes.gateway ...`` from tests/. Run as a directory there is no package
context, so the tests folder goes on the path and the package is imported by name.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from fakes.gateway.server import main
else:
    from .server import main

sys.exit(main())
