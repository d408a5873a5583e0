"""Execution: how a workload starts on a target and how its result document comes back.

:mod:`~dlbench.execution.targets` holds the access types (everything that depends on the kind of
access is a method of them), :mod:`~dlbench.execution.placement` which machine a job runs on,
:mod:`~dlbench.execution.executors` which executor starts it; one module per executor.
"""
