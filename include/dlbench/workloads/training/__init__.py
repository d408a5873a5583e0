"""The training suites' framework-neutral core: the study's measurement protocol, its scenarios, a
job's roles across instances, the frameworks and the :class:`~.trainer.Trainer` contract. Every
training suite (the CNNs, the transformer, dltools, Fathom) builds on it; it imports no framework.
"""
