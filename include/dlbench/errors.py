"""Every error dlbench raises on purpose, in one tree at the bottom of the package.

Catch :class:`DlbenchError` for "ours"; each leaf says what the user should do about it. The
leaves keep the built-in base they always had (``ValueError`` for bad input, ``RuntimeError`` for
a failure, ``TimeoutError`` for a wait that ran out), so code that catches those still does.
Imports nothing: every layer may raise these.

::

    DlbenchError
    ├── ConfigError (ValueError)            fix the request / profile / settings field it names
    ├── CloudConfigError (ValueError)       fix clouds.yaml or the Airflow connection it names
    ├── ProvisioningError (RuntimeError)    the cloud refused or failed; its own words are quoted
    │   ├── NoCapacity                      free or enroll machines, or ask for fewer
    │   └── each provider's own (IronicError, NovaError... in its module)
    ├── WaitTimeout (TimeoutError)          raise the timeout it names, or find what is stuck
    ├── ExecutionError (RuntimeError)       the workload could not start or report
    │   ├── StagingError                    the data on the machine is not what was sent
    │   └── PeerError                       the network peer could not start or stop
    ├── MachineBusy (RuntimeError)          another run holds the machine; wait or free it
    └── JobOutcome (RuntimeError)           how a task ends in Airflow
        ├── JobFailed                       the workload ran and failed: read its output tail
        ├── JobSkipped                      cannot run here (reason given); not a failure
        └── ScenarioSkipped                 a scenario's targets cannot host it (becomes JobSkipped)
"""

from __future__ import annotations


class DlbenchError(Exception):
    """Base of every error dlbench raises on purpose."""


class ConfigError(DlbenchError, ValueError):
    """A request, profile or setting that cannot run; the message names the field and the allowed
    values. Fix that field: nothing was provisioned."""


class CloudConfigError(DlbenchError, ValueError):
    """The cloud cannot be reached as configured (unknown cloud, missing credentials): fix the
    clouds.yaml entry or Airflow connection the message names. A sibling of :class:`ConfigError`,
    not a kind of it: the validate step reports it under the provider's name (``ironic: ...``)."""


class ProvisioningError(DlbenchError, RuntimeError):
    """A cloud refused or failed to provide machines; the message quotes the cloud's own words
    (``last_error``, fault, ``status_reason``). What was created is released before it is raised."""


class NoCapacity(ProvisioningError):
    """Not enough free machines match the request: free or enroll some, or ask for fewer."""





class WaitTimeout(DlbenchError, TimeoutError):
    """A wait ran out of time; the message names what was awaited and its last state. Raise the
    timeout it names if the cloud is just slow, else look at what is stuck."""


class ExecutionError(DlbenchError, RuntimeError):
    """The workload could not be started or its result could not be fetched."""


class StagingError(ExecutionError):
    """The data on the node is missing, empty, or not what the controller sent."""


class PeerError(ExecutionError):
    """The network peer could not be started, or could not be stopped."""


class MachineBusy(DlbenchError, RuntimeError):
    """Another run holds the machine (the message names its holder): wait for it, or free it."""


class JobOutcome(DlbenchError, RuntimeError):
    """How a job's task ends other than with a result: Airflow marks the task by its subclass."""


class JobFailed(JobOutcome):
    """The workload ran and failed; the message carries its error and output tail."""


class JobSkipped(JobOutcome):
    """The job cannot run on this platform or machine (the reason is given); not a failure."""


class ScenarioSkipped(JobOutcome):
    """A distributed or shared scenario cannot run with these targets (too few machines...)."""
