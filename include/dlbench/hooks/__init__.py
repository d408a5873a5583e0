"""Connections to the clouds dlbench provisions on (OpenStack via openstacksdk)."""
