"""The devcloud's Magnum cluster driver (docs/magnum.md)."""
