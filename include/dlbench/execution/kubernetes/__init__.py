"""Run a workload as a Kubernetes Job on any cluster: the container platforms on Kubernetes.

Built on the official ``kubernetes`` Python client (not the Airflow cncf.kubernetes provider's
hook: that provider pins its own client range and brings the pod operator's machinery, while we
need five typed calls and nothing of Airflow on this path; an Airflow connection of type
``kubernetes`` is still accepted, see :func:`dlbench.execution.kubernetes.client.api_client`).
The client library is imported only inside the functions that call the cluster, so importing
any module of this package is light.

One module per concern:

- :mod:`~dlbench.execution.kubernetes.client`: the API client (kubeconfig or Airflow connection);
- :mod:`~dlbench.execution.kubernetes.labels`: label values, our labels and annotations, the run's selector;
- :mod:`~dlbench.execution.kubernetes.pods`: reading a pod's state, its Warning events, the API's refusals;
- :mod:`~dlbench.execution.kubernetes.facts`: the cluster facts a number went through (CNI, kubelet, runtime);
- :mod:`~dlbench.execution.kubernetes.quantity`: memory quantities (``8Gi``): their form and their bytes;
- :mod:`~dlbench.execution.kubernetes.namespaces`: a run's namespace is usable (its ServiceAccount exists);
- :mod:`~dlbench.execution.kubernetes.rbac`: the permissions dlbench needs (ClusterRole, Role), stated once;
- :mod:`~dlbench.execution.kubernetes.services`: the headless Service of a distributed role group;
- :mod:`~dlbench.execution.kubernetes.watching`: watches that wake the executor's wait at each change;
- :mod:`~dlbench.execution.kubernetes.results`: how the result document leaves the pod on its log;
- :mod:`~dlbench.execution.kubernetes.peer`: the network suite's peer pod on another node;
- :mod:`~dlbench.execution.kubernetes.executor`: :class:`KubernetesExecutor`, one Job per workload run.

One Job per workload run (``backoffLimit: 0``, ``restartPolicy: Never``,
``activeDeadlineSeconds`` = the job's timeout, so the cluster itself enforces it), in the run's
namespace, pinned to the target's node (``nodeSelector`` ``kubernetes.io/hostname``), with the
workload image, requests = limits (CPU, memory, ``nvidia.com/gpu`` from the GPU allotment), our
labels (``dlbench=1``, ``dlbench.run_id``, ``dlbench.job_id``) and the run's expiry and the exact
ids as annotations (label values cannot hold them).

The result document comes back without a shared filesystem, on the container's log: the pod runs
``sh -c`` around the workload, which after it exits prints the document gzip-compressed and
base64-encoded between ``DLBENCH-RESULT-BEGIN``/``END`` markers carrying its SHA-256 and size
(:data:`dlbench.execution.kubernetes.results.EMIT`). The executor reads the pod's full log once the
container has terminated, takes the last complete block and verifies length and checksum. Limits:
the block is printed last, so kubelet log rotation (``containerLogMaxSize``, 10 MiB by default)
only loses it when the *encoded* document alone is larger than one log file (JSON compresses
5-20x: a document of tens of MiB); the log must still exist (the Job is deleted only after it was
read). SIGTERM (the deadline, a stop) is forwarded to the workload, which writes its document,
which is then printed.

Failures name the cluster's reason: ``ImagePullBackOff``/``ErrImagePull`` (with the pull event),
``OOMKilled`` (exit 137 and the memory limit), ``Unschedulable`` (the scheduler's message, after
``KubernetesExecutor.unschedulable_after`` s), ``DeadlineExceeded`` (the Job's condition), a
pod deleted while it ran; the pod's Warning events are appended.

The cluster facts a container-on-Kubernetes number went through are recorded in the document's
``environment.versions`` and labels: the CNI (from its DaemonSet in ``kube-system``), the node's
kubelet and container runtime versions, the node name.

The network suite's peer is a pod of the run on another node
(:func:`dlbench.execution.kubernetes.peer.network_endpoint`): the client measures against its
``status.podIP``, through the CNI.

Nothing is re-exported here: each name has its one home in the module of its concern.
"""
