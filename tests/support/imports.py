"""What a Python file imports, read from its source (every import statement, function-local ones
too): the architecture tests' rules on modules, conftests and the devcloud's scripts."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_modules(path: Path) -> set[str]:
    """The dotted names ``path`` imports (``from a.b import c`` gives ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found
