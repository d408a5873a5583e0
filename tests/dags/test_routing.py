"""Queues and pools that match the hardware (``[dlbench] routing``): the DAG's job task per route,
its queue and pool, the setup queue, errors naming the field, and a real dag.test() run whose
jobs all went through the route of their provider."""

from __future__ import annotations

import json

import pytest

from dlbench.pipeline.routing import ENV, JOB_TASK, jobs_for_task, load_routing, parse_routing
from tests.support.prereqs import ROOT

ROUTING = {"setup_queue": "setup-q",
           "routes": [{"name": "near", "providers": ["local"], "queue": "near-q", "pool": "dlbench_near"},
                      {"name": "dc", "providers": ["ironic", "nova"], "queue": "dc-q"}]}


@pytest.mark.parametrize(("raw", "words"), [
    ("{not json", "is not JSON"),
    ({"routes": [{"name": "x", "providers": ["ec2"]}]}, "routing.routes.0.providers: "),
    ({"routes": [{"name": "Bad-Name", "providers": ["nova"]}]}, "routing.routes.0.name"),
    ({"routes": [{"name": "a", "providers": ["nova"]}, {"name": "b", "providers": ["nova"]}]},
     "provider 'nova' is in routes 'a' and 'b'"),
    ({"routes": [{"name": "a", "providers": []}]}, "routing.routes.0.providers"),
    ({"routez": []}, "routing.routez"),
])
def test_bad_routing_names_the_field(raw, words):
    with pytest.raises(ValueError) as exc:
        parse_routing(raw)
    assert words in str(exc.value), str(exc.value)
    if "providers: " in words:
        assert "allowed: local, ironic" in str(exc.value) or "allowed:" in str(exc.value)


def test_routing_comes_from_airflow_config_env(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert load_routing().routes == ()
    monkeypatch.setenv(ENV, json.dumps(ROUTING))
    routing = load_routing()
    assert routing.setup_queue == "setup-q" and routing.task_of("nova") == "run_job__dc"
    assert routing.task_of("kubernetes") == JOB_TASK and routing.route_of("local").pool == "dlbench_near"


def test_each_job_belongs_to_exactly_one_job_task():
    from dlbench.pipeline.steps import plan
    from dlbench.request import parse_request

    request = parse_request({
        "providers": [{"name": "ironic", "cloud": "devcloud"}, {"name": "nova", "cloud": "devcloud"}],
        "platforms": ["bare_metal", "virtual_machine", "container_on_vm"], "suites": ["cpu"], "profile": "smoke",
        "repetitions": 1}).model_dump(mode="json")
    jobs = plan(request, "routing-run")
    routing = parse_routing({"routes": [{"name": "bm", "providers": ["ironic"], "queue": "bm-q"},
                                        {"name": "vm", "providers": ["nova"]}]})
    split = {task: jobs_for_task(jobs, request, task, routing) for task in (JOB_TASK, "run_job__bm", "run_job__vm")}
    assert split[JOB_TASK] == []
    assert {j["platform"] for j in split["run_job__bm"]} == {"bare_metal"}
    assert {j["platform"] for j in split["run_job__vm"]} == {"virtual_machine", "container_on_vm"}
    assert sorted(j["job_id"] for part in split.values() for j in part) == sorted(j["job_id"] for j in jobs)
    only_bm = parse_routing({"routes": [{"name": "bm", "providers": ["ironic"]}]})
    assert {j["platform"] for j in jobs_for_task(jobs, request, JOB_TASK, only_bm)} == {"virtual_machine",
                                                                                         "container_on_vm"}


def _bag(monkeypatch, routing: dict | None):
    from airflow.dag_processing.dagbag import DagBag

    if routing is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, json.dumps(routing))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag


def test_dag_declares_a_job_task_per_route_with_its_queue_and_pool(airflow_db, monkeypatch):
    plain = _bag(monkeypatch, None).dags["dlbench_benchmark"]
    assert [t for t in plain.task_ids if t.startswith(JOB_TASK)] == [JOB_TASK]  # unchanged without routing
    bag = _bag(monkeypatch, ROUTING)
    dag = bag.dags["dlbench_benchmark"]
    tasks = {t.task_id: t for t in dag.tasks}
    assert tasks["run_job__near"].queue == "near-q" and tasks["run_job__near"].pool == "dlbench_near"
    assert tasks["run_job__dc"].queue == "dc-q" and tasks["run_job__dc"].pool == "dlbench_benchmark"
    assert tasks[JOB_TASK].pool == "dlbench_benchmark" and tasks[JOB_TASK].queue == plain.get_task(JOB_TASK).queue
    assert tasks["provision"].queue == tasks["release"].queue == "setup-q"
    assert tasks["validate_request"].queue == plain.get_task("validate_request").queue  # API-free tasks: default
    for job_task in ("run_job__near", "run_job__dc", JOB_TASK):
        assert {"release", "load"} <= tasks[job_task].downstream_task_ids
    assert bag.dags["dlbench_janitor"].get_task("sweep").queue == "setup-q"


def test_bad_routing_is_an_import_error_naming_the_field(airflow_db, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv(ENV, json.dumps({"routes": [{"name": "x", "providers": ["ec2"]}]}))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    errors = "\n".join(bag.import_errors.values())
    assert "routing.routes.0.providers" in errors and "ec2" in errors


def test_a_routed_run_sends_every_job_through_its_route(airflow_db, monkeypatch, workload_image):
    """A real run (this host, bare metal, cpu, smoke): the local provider is routed to ``near``, so
    its jobs are ``run_job__near`` task instances on queue near-q in pool dlbench_near; the default
    job task maps over nothing and is skipped; the run is green."""
    from airflow.models.pool import Pool

    Pool.create_or_update_pool("dlbench_near", slots=1, description="test route", include_deferred=False)
    dag = _bag(monkeypatch, ROUTING).dags["dlbench_benchmark"]
    run = dag.test(run_conf={"profile": "smoke", "repetitions": 1, "platforms": ["bare_metal"], "suites": ["cpu"]})
    tis = run.get_task_instances()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in tis}
    assert str(run.state).endswith("success"), states
    near = [ti for ti in tis if ti.task_id == "run_job__near"]
    assert near and all(str(ti.state).endswith("success") for ti in near), states
    assert {(ti.queue, ti.pool) for ti in near} == {("near-q", "dlbench_near")}
    assert all(str(ti.state).endswith("skipped") for ti in tis if ti.task_id == JOB_TASK), states
    assert {ti.queue for ti in tis if ti.task_id in ("provision", "release")} == {"setup-q"}
