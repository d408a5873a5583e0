"""Development and test tools: not part of the installed package (see docs/architecture.md)."""
