"""Provisioning: one driver per platform behind one small interface (see base)."""
