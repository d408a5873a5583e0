"""Execution: how a workload is started on a target and how its result comes back."""
