"""The one way a command for a remote shell is built: from argv, every word quoted.

SSH runs a command line through the remote user's shell, so any value that reaches it (an
image name, a path, a user-supplied argument) must be one quoted word. Nothing in dlbench
builds a remote command with string formatting; it calls :func:`command_line` (or
:func:`pipeline` for ``a && b``) with argv lists.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as one shell command line, each word quoted (``shlex.join``)."""
    if not argv:
        raise ValueError("empty command")
    return shlex.join(str(word) for word in argv)


def pipeline(*commands: Sequence[str], joiner: str = "&&") -> str:
    """Several argv commands joined by a fixed shell operator (``&&``, ``;``, ``||``)."""
    if joiner not in ("&&", ";", "||"):
        raise ValueError(f"joiner must be one of &&, ;, || (got {joiner!r})")
    return f" {joiner} ".join(command_line(argv) for argv in commands)
