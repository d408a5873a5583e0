"""Workloads: what runs on the benchmarked machine.

This package must stay importable without Airflow, pandas or openstacksdk: it ships alone
in the workload image built from ``docker/``. TensorFlow is imported lazily, only by the
workloads that need it. Every workload writes one :class:`~dlbench.workloads.result.ResultDocument`.
"""
