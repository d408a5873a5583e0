"""The provider seam: generic code names no provider, drivers are called only through the
Driver interface, and provider settings are one discriminated union."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dlbench.errors import ConfigError
from dlbench.providers import janitor
from dlbench.providers.base import Driver
from dlbench.providers.registry import PROVIDERS
from dlbench.request import parse_request
from tests.support.imports import imported_modules

PACKAGE = Path(__file__).resolve().parents[2] / "include" / "dlbench"
GENERIC = ["pipeline/steps.py", "providers/machines.py", "providers/backend.py", "providers/composite.py",
           "providers/janitor.py", "providers/datasets.py", "jobs.py", "execution/targets.py"]


@pytest.mark.parametrize("module", GENERIC)
def test_generic_modules_import_no_specific_provider(module):
    providers = {f"dlbench.providers.{name}" for name in PROVIDERS} | {"dlbench.hooks.openstack", "openstack"}
    assert not imported_modules(PACKAGE / module) & providers


def test_the_lifecycle_calls_only_methods_the_driver_interface_declares():
    declared = {name for name, _ in inspect.getmembers(Driver) if not name.startswith("_")}
    source = ((PACKAGE / "providers" / "machines.py").read_text() + (PACKAGE / "providers" / "sweep.py").read_text()
              + (PACKAGE / "providers" / "janitor.py").read_text())
    called = {node.attr for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and node.value.attr == "driver"}
    called |= {node.attr for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "driver"}
    assert called and called <= declared, called - declared


def test_every_driver_implements_the_whole_interface():
    for name, provider in PROVIDERS.items():
        if (driver := provider.driver) is not None:
            assert issubclass(driver, Driver) and not inspect.isabstract(driver), name


def test_provider_settings_are_one_union_and_other_providers_objects_are_refused():
    request = parse_request({"provider": "ironic", "ironic": {"cloud": "prod", "nodes": {"bare_metal": 3}}})
    assert request.provider.name == "ironic"
    assert parse_request(request.model_dump(mode="json")) == request  # the normalized form round-trips (XCom)
    with pytest.raises(ConfigError, match="ironic: settings given but provider is 'local'"):
        parse_request({"provider": "local", "ironic": {"cloud": "prod"}})
    with pytest.raises(ConfigError, match="provider: unknown provider 'openshift'"):
        parse_request({"provider": "openshift"})


def test_janitor_clouds_come_from_configuration():
    assert janitor.clouds_from(None) == [] and janitor.clouds_from("[]") == []
    (cloud,) = janitor.clouds_from('[{"name": "ironic", "cloud": "production", "release_timeout": 600}]')
    assert cloud.name == "ironic" and cloud.release_timeout == 600
    with pytest.raises(ValueError, match="must be a JSON list"):
        janitor.clouds_from('{"name": "ironic"}')
    with pytest.raises(ValueError, match="provisions nothing to sweep"):
        janitor.clouds_from('[{"name": "local"}]')
    with pytest.raises(ValueError):
        janitor.clouds_from('[{"name": "ironic", "cloud": "bad; rm -rf /"}]')
    dag_source = (PACKAGE / "dags" / "janitor.py").read_text()
    assert "devcloud" not in dag_source  # no cloud baked into the DAG


def test_numeric_fields_are_bounded_and_the_matrix_fits_airflow_mapping():
    from dlbench.pipeline import steps

    for field, value in [("ready_timeout", 1e12), ("release_timeout", -1), ("expiry_hours", 1e9),
                         ("poll_interval", float("nan")), ("root_gb", 10**9), ("nodes", {"bare_metal": 5000}),
                         ("allocate_timeout", float("inf"))]:
        with pytest.raises(ConfigError, match=rf"ironic[.:] ?{field}"):
            parse_request({"provider": "ironic", "ironic": {"cloud": "prod", field: value}})
    with pytest.raises(ConfigError, match="repetitions"):
        parse_request({"repetitions": 101})
    with pytest.raises(ConfigError, match=r"expands to 1100 jobs, more than .* max_map_length \(1024\)"):
        steps.validate({"platforms": ["bare_metal", "container_on_bare_metal"], "repetitions": 50}, max_jobs=1024)


def test_janitor_removes_the_private_state_of_runs_that_are_over(monkeypatch, tmp_path):
    from datetime import UTC, datetime, timedelta

    from dlbench import paths
    from dlbench.providers import run_secrets
    from dlbench.providers.base import Tags
    from dlbench.providers.machines import generate_keypair, key_dir

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    soon = datetime.now(UTC) + timedelta(hours=1)
    past = datetime.now(UTC) - timedelta(minutes=1)
    runs = {"live": Tags("live", "d", "r-live", soon), "ended": Tags("ended", "d", "r-ended", soon),
            "old": Tags("old", "d", "r-old", past),
            "lapsed": Tags("lapsed", "d", "r-lapsed", soon),
            # Killed during its release (its machines untagged: nothing left in the cloud), its DAG
            # run still `running` in Airflow: the record's lapsed lease decides (issue 38, item 2).
            "killed-in-release": Tags("killed-in-release", "d", "r-killed", soon, lease_until=past),
            # A long run past its expiry whose live task renews the lease: kept.
            "long": Tags("long", "d", "r-long", past, lease_until=soon)}
    for run_id, tags in runs.items():
        generate_keypair(key_dir(run_id))
        run_secrets.record_run(tags)
    (paths.runs_dir() / "fresh-untagged").mkdir()  # a setup killed a moment ago, before writing tags

    def active(tags: Tags) -> bool:
        return tags.dag_run_id != "r-ended"

    dry = janitor.sweep_run_state(active, dry_run=True, released_runs={"lapsed"})
    assert {a["run_id"] for a in dry} == {"ended", "old", "lapsed", "killed-in-release"}
    assert all((paths.runs_dir() / r).exists() for r in runs)
    done = {a["run_id"]: a["reason"] for a in janitor.sweep_run_state(active, released_runs={"lapsed"})}
    assert "no longer running" in done["ended"] and done["old"].startswith("expired")
    assert "released in this sweep" in done["lapsed"]
    assert done["killed-in-release"].startswith(f"lease lapsed at {past.isoformat()}")
    assert sorted(p.name for p in paths.runs_dir().iterdir()) == ["fresh-untagged", "live", "long"]
    # A live task's renewal moves the record's lease (LeaseKeeper.renew_once, the Kubernetes renewal).
    later = soon + timedelta(hours=1)
    assert run_secrets.renew_record("long", later) and run_secrets.run_record("long").lease_until == later
    assert not run_secrets.renew_record("ended", later)  # removed: nothing to renew, nothing written
    assert not (paths.runs_dir() / "ended").exists()


def test_several_providers_in_one_run_split_the_platforms():
    """Ironic bare metal + Nova VMs in one run: each platform from the provider that offers it;
    each backend sees only its own platforms; the request round-trips through XCom."""
    from dlbench.providers.composite import CompositeBackend
    from dlbench.providers.registry import backend_for_request
    from dlbench.request import Platform

    four = [p.value for p in Platform]
    request = parse_request({"providers": ["ironic", "nova"], "platforms": four, "ironic": {"cloud": "c"},
                             "nova": {"cloud": "c", "network": "net"}})
    assert [p.name for p in request.providers] == ["ironic", "nova"] and request.provider_names == "ironic+nova"
    assert parse_request(request.model_dump(mode="json")) == request
    assert request.provider_for(Platform.CONTAINER_ON_VM).name == "nova"
    assert request.provider_for(Platform.BARE_METAL).name == "ironic"
    narrowed = request.for_provider(request.providers[1])
    assert narrowed.platforms == [Platform.VIRTUAL_MACHINE, Platform.CONTAINER_ON_VM]
    assert [p.name for p in narrowed.providers] == ["nova"]
    assert isinstance(backend_for_request(request), CompositeBackend)
    # a platform nobody offers, a provider that provisions nothing requested, the same provider twice
    with pytest.raises(ConfigError, match="platforms: 'virtual_machine' is not offered by provider 'ironic'"):
        parse_request({"provider": "ironic", "platforms": ["virtual_machine"], "ironic": {"cloud": "c"}})
    with pytest.raises(ConfigError, match="providers: nova provisions none of the requested platforms"):
        parse_request({"providers": ["ironic", "nova"], "platforms": ["bare_metal"], "ironic": {"cloud": "c"},
                       "nova": {"cloud": "c"}})
    with pytest.raises(ConfigError, match="each provider at most once"):
        parse_request({"providers": ["ironic", "ironic"], "platforms": ["bare_metal"], "ironic": {"cloud": "c"}})
    # a field of the second provider is named as nova.<field>
    with pytest.raises(ConfigError, match="nova.placement: .*allowed: auto, none, anti-affinity"):
        parse_request({"providers": ["ironic", "nova"], "platforms": four, "ironic": {"cloud": "c"},
                       "nova": {"cloud": "c", "placement": "everywhere"}})
    # distributed needs 3 VMs from nova, named with nova's field
    with pytest.raises(ConfigError, match=r"set nova.nodes.virtual_machine to 3 or more"):
        parse_request({"providers": ["ironic", "nova"], "platforms": ["bare_metal", "virtual_machine"],
                       "scenarios": ["distributed"], "suites": ["tf_cnn"], "ironic": {"cloud": "c", "nodes": {
                           "bare_metal": 3}}, "nova": {"cloud": "c"}})


def test_distributed_runs_ask_the_cloud_to_spread_the_machines():
    from dlbench.providers.machines import plan_demands

    request = parse_request({"provider": "nova", "platforms": ["virtual_machine", "container_on_vm"],
                             "scenarios": ["single", "distributed"], "suites": ["tf_cnn"],
                             "nova": {"cloud": "c", "share_nodes": True, "nodes": {"virtual_machine": 3}}})
    (demand,) = plan_demands(request, request.provider)
    assert (demand.role, demand.count, demand.placement) == ("vm", 3, "spread")
    single = parse_request({"provider": "nova", "platforms": ["virtual_machine"], "nova": {"cloud": "c"}})
    assert plan_demands(single, single.provider)[0].placement == ""


def test_shared_scenario_pairs_two_vms_on_one_host():
    """Two instances with the same host id (two VMs packed on one hypervisor) carry the shared
    scenario's two jobs; instances on different hosts, or one instance twice, do not."""
    from dlbench.execution.targets import HOST_LABEL, SSHHost, Target
    from dlbench.pipeline.scenarios import co_located_pair
    from dlbench.providers.machines import plan_demands

    def vm(name: str, host: str, instance: str | None = None) -> Target:
        return Target(name=name, platform="virtual_machine", instance_id=instance or name,
                      access=SSHHost(address="198.18.96.10", key_path="/k"), labels={HOST_LABEL: host})

    pair = co_located_pair([vm("a", "h1"), vm("b", "h2"), vm("c", "h1")])
    assert pair is not None and [t.name for t in pair] == ["a", "c"]
    assert co_located_pair([vm("a", "h1"), vm("b", "h2")]) is None
    assert co_located_pair([vm("a", "h1", "i"), vm("b", "h1", "i")]) is None  # one VM, two platforms
    assert co_located_pair([vm("a", ""), vm("b", "")]) is None  # hosts unknown (bare metal)
    shared = parse_request({"provider": "nova", "platforms": ["virtual_machine"], "scenarios": ["shared"],
                            "suites": ["tf_cnn"], "nova": {"cloud": "c", "nodes": {"virtual_machine": 2}}})
    assert plan_demands(shared, shared.provider)[0].placement == "pack"


def test_one_cap_for_every_per_machine_thread_pool(monkeypatch):
    """Allocate, deploy, make-ready and release threads all come from ``parallelism``: one setting."""
    from dlbench.providers.base import PARALLELISM_ENV, parallelism

    root = Path(janitor.__file__).resolve().parents[1]
    pools = []
    for path in sorted((root / "providers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ThreadPoolExecutor":
                workers = next(k.value for k in node.keywords if k.arg == "max_workers")
                pools.append((path.name, ast.unparse(workers)))
    assert len(pools) >= 5 and all(w.startswith("parallelism(") for _, w in pools), pools

    monkeypatch.delenv(PARALLELISM_ENV, raising=False)
    assert (parallelism(0), parallelism(3), parallelism(100)) == (1, 3, 16)
    monkeypatch.setenv(PARALLELISM_ENV, "40")
    assert parallelism(100) == 40
    monkeypatch.setenv(PARALLELISM_ENV, "lots")
    with pytest.raises(ValueError, match="DLBENCH_PROVISION_THREADS='lots'"):
        parallelism(1, strict=True)
    assert parallelism(100) == 16  # a release never fails on it
