"""Fleet survey (``every_machine``): each single-scenario job planned once per machine of its
platform, the machine index in the job's id, label and document, ``pick_target`` sending job i to
machine i, and the requests that cannot be planned that way refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from dlbench.errors import ConfigError
from dlbench.execution import placement
from dlbench.execution.base import MACHINE_LABEL, failed_document
from dlbench.execution.targets import SSHHost, Target
from dlbench.jobs import Job
from dlbench.request import parse_request, plan_jobs
from dlbench.workloads.result import Platform

RUN = "fleet"


def _ironic(nodes: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {"provider": "ironic", "ironic": {"cloud": "somewhere", "nodes": nodes, **extra},
            "suites": ["cpu", "tf_cnn"], "models": ["alexnet", "resnet50"], "data": ["synthetic"],
            "profile": "smoke", "repetitions": 2}


def _target(name: str, platform: Platform = Platform.BARE_METAL, skip: str | None = None) -> Target:
    return Target(name=name, platform=platform, instance_id=f"uuid-{name}", skip_reason=skip,
                  access=SSHHost(address="198.18.1.2", key_path="/nonexistent/key"))


def test_one_job_per_machine_and_cell_with_distinct_ids_and_labels() -> None:
    request = parse_request({**_ironic({"bare_metal": 5}), "platforms": ["bare_metal"], "every_machine": True})
    plain = plan_jobs(request.model_copy(update={"every_machine": False}), RUN)
    jobs = plan_jobs(request, RUN)
    # cells x repetitions x machines: cpu (1 cell) + tf_cnn (2 models x 1 data) = 3 cells, 2 repetitions
    assert len(plain) == 3 * 2
    assert len(jobs) == 5 * len(plain)
    assert len({j.job_id for j in jobs}) == len(jobs)
    assert len({j.label for j in jobs}) == len(jobs)
    for cell in plain:  # each planned cell once on each machine, nothing else changed
        same = [j for j in jobs if (j.suite, j.args, j.repetition) == (cell.suite, cell.args, cell.repetition)]
        assert sorted(j.machine for j in same) == [0, 1, 2, 3, 4]
        assert {j.timeout_s for j in same} == {cell.timeout_s}
    cpu = [j for j in jobs if j.suite == "cpu" and j.repetition == 0]
    assert [j.label for j in cpu] == [f"bare_metal/cpu/m{i}/r0" for i in range(5)]
    assert {j.machine for j in plain} == {None}  # off: the plan (and its ids) is the usual one
    assert plain[0].label == "bare_metal/cpu/r0"


def test_machine_counts_come_from_the_provider_settings_per_platform() -> None:
    shared = parse_request({**_ironic({"bare_metal": 4}, share_nodes=True),
                            "platforms": ["bare_metal", "container_on_bare_metal"], "every_machine": True,
                            "suites": ["cpu"], "repetitions": 1})
    jobs = plan_jobs(shared, RUN)
    # containers share the 4 bare-metal nodes: 4 machines for each platform
    assert sorted((j.platform.value, j.machine) for j in jobs) == sorted(
        [("bare_metal", i) for i in range(4)] + [("container_on_bare_metal", i) for i in range(4)])
    separate = parse_request({**_ironic({"bare_metal": 3, "container_on_bare_metal": 2}),
                              "platforms": ["bare_metal", "container_on_bare_metal"], "every_machine": True,
                              "suites": ["cpu"], "repetitions": 1})
    counts = {p: sum(1 for j in plan_jobs(separate, RUN) if j.platform.value == p)
              for p in ("bare_metal", "container_on_bare_metal")}
    assert counts == {"bare_metal": 3, "container_on_bare_metal": 2}
    local = parse_request({"platforms": ["bare_metal"], "suites": ["cpu"], "repetitions": 1, "every_machine": True})
    assert [j.machine for j in plan_jobs(local, RUN)] == [0]  # this host: one machine


def test_pick_target_runs_job_i_on_machine_i_in_a_stable_order() -> None:
    request = parse_request({**_ironic({"bare_metal": 12}), "platforms": ["bare_metal"], "suites": ["cpu"],
                             "repetitions": 1, "every_machine": True})
    jobs = plan_jobs(request, RUN)
    names = [f"dlbench-run-bare_metal-{i}" for i in range(12)]
    listed = list(reversed(names[:6])) + names[6:]  # whatever order the provisioning step listed them in
    targets = [_target(n) for n in listed] + [_target("docker-x", Platform.CONTAINER_ON_BARE_METAL)]
    picked = [placement.pick_target(j, targets).name for j in jobs]
    assert picked == names  # ...-2 before ...-10: numbers compared as numbers
    # the same index picks the same machine whatever order the targets arrive in (any worker)
    assert [placement.pick_target(j, list(reversed(targets))).name for j in jobs] == picked
    # without a machine index the hash of the job id still spreads the jobs
    plain = Job.model_validate({**jobs[0].model_dump(), "machine": None})
    assert placement.pick_target(plain, targets) in targets[:12]


def test_a_machine_index_beyond_the_provisioned_machines_fails_naming_the_field() -> None:
    request = parse_request({**_ironic({"bare_metal": 3}), "platforms": ["bare_metal"], "suites": ["cpu"],
                             "repetitions": 1, "every_machine": True})
    last = plan_jobs(request, RUN)[-1]
    with pytest.raises(ValueError, match=r"every_machine: .*machine 2 of bare_metal.*provisioned 2"):
        placement.pick_target(last, [_target("a-1"), _target("a-2")])
    # a platform that could not be provisioned (one skipped stand-in): the job is skipped with the reason
    skipped = placement.pick_target(last, [_target("kubernetes", skip="no cluster")])
    assert skipped.skip_reason == "no cluster"


def test_documents_carry_the_machine_index() -> None:
    request = parse_request({**_ironic({"bare_metal": 2}), "platforms": ["bare_metal"], "suites": ["cpu"],
                             "repetitions": 1, "every_machine": True})
    docs = [failed_document(j, "not run") for j in plan_jobs(request, RUN)]
    assert [d.labels[MACHINE_LABEL] for d in docs] == ["0", "1"]
    assert len({d.job_id for d in docs}) == 2
    # the case is the same on every machine: parameters do not carry the machine
    assert docs[0].benchmark.parameters == docs[1].benchmark.parameters
    off = plan_jobs(request.model_copy(update={"every_machine": False}), RUN)
    assert MACHINE_LABEL not in failed_document(off[0], "not run").labels


@pytest.mark.parametrize("scenario", ["distributed", "shared"])
def test_multi_instance_scenarios_are_refused_naming_the_field(scenario: str) -> None:
    with pytest.raises(ConfigError, match=rf"every_machine: .*scenario {scenario}"):
        parse_request({**_ironic({"bare_metal": 3}), "platforms": ["bare_metal"], "suites": ["tf_cnn"],
                       "scenarios": ["single", scenario], "every_machine": True})


def test_an_unknown_machine_count_is_refused_naming_the_field() -> None:
    base = {"provider": "kubernetes", "platforms": ["container_on_bare_metal"], "suites": ["cpu"],
            "every_machine": True}
    with pytest.raises(ConfigError, match=r"every_machine: .*set kubernetes\.nodes"):
        parse_request({**base, "kubernetes": {"kubeconfig": "/nonexistent/kubeconfig"}})
    planned = parse_request({**base, "kubernetes": {"kubeconfig": "/nonexistent/kubeconfig", "nodes": 3},
                             "repetitions": 1})
    assert [j.machine for j in plan_jobs(planned, RUN)] == [0, 1, 2]


def test_the_flag_is_off_by_default_and_a_dag_param() -> None:
    from dlbench.dags import benchmark

    assert parse_request({"suites": ["cpu"]}).every_machine is False
    param = benchmark.params()["every_machine"]
    assert param.value is False and param.schema["type"] == "boolean" and param.description
    # the form's default reaches the request as the field's default
    assert parse_request({"suites": ["cpu"], "every_machine": param.value}).every_machine is False


def test_the_report_counts_each_machine_as_a_sample_of_one_case(tmp_path: Any) -> None:
    """Per-node results are repetition-like samples of the same case (n = machines), never
    separate cases, and the warehouse keeps which machine each came from."""
    from dlbench.reports.analysis.compare import samples_frame, statistics
    from dlbench.warehouse import db
    from dlbench.warehouse.load import load_documents
    from dlbench.workloads.result import Environment

    request = parse_request({**_ironic({"bare_metal": 4}), "platforms": ["bare_metal"], "suites": ["cpu"],
                             "repetitions": 1, "every_machine": True})
    jobs = plan_jobs(request, RUN)
    docs = []
    for job, seconds in zip(jobs, (4.9, 5.0, 5.1, 9.0), strict=True):  # machine 3 is the slow node
        doc = failed_document(job, "")
        doc.status, doc.error = doc.status.OK, ""
        doc.environment = Environment(hostname=f"node-{job.machine}", platform=job.platform)
        doc.add("elapsed_time", seconds, "s")
        docs.append(doc)
    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'w.db'}"))
    load_documents(engine, docs)
    frame = samples_frame(engine, RUN)
    assert sorted(lab["machine"] for lab in frame["execution_labels"]) == ["0", "1", "2", "3"]
    table = statistics(frame)
    row = table[(table["metric"] == "elapsed_time") & (table["platform"] == "bare_metal")]
    assert len(row) == 1 and int(row["n"].iloc[0]) == 4
    assert float(row["mean"].iloc[0]) == pytest.approx((4.9 + 5.0 + 5.1 + 9.0) / 4)
    slow = frame[frame["value"] == 9.0]["execution_labels"].iloc[0]
    assert slow["machine"] == "3"  # the slow node is named by its label
