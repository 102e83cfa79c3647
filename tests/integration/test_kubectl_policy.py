"""Real kubectl 1.27 and 1.33 on the policy objects: `create quota` (1.33 sends it as protobuf), `get quota`
(the server's Table), `describe quota` and `describe limitrange`, `create priorityclass` and `get pc`, and
`get rc` / `scale rc`; the official Python client creates a ReplicationController as its own e2e tests do."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_kubectl import kubectl  # noqa: F401 — the fixture, reused
from tests.kubectl import Kubectl

pytestmark = pytest.mark.kubectl

PROTOBUF = "Content-Type: application/vnd.kubernetes.protobuf"


@pytest.fixture(scope="module")
def controllers(workdir: Path, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, apiserver.url, ["resourcequota", "replicationcontroller"])
    process.start()
    yield process
    process.stop()


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_create_get_and_describe_quota(kubectl: Kubectl, api: httpx.Client, namespace: str,  # noqa: F811
                                       controllers: ControllerProcess) -> None:
    r = kubectl.run("create", "quota", "q", "--hard=pods=2,requests.cpu=1,limits.memory=1Gi", "-v=8").ok()
    assert r.stdout.strip() == "resourcequota/q created"
    assert (PROTOBUF in r.stderr) == (kubectl.version == "1.33")
    quota = api.get(f"/api/v1/namespaces/{namespace}/resourcequotas/q").json()
    assert quota["spec"]["hard"] == {"pods": "2", "requests.cpu": "1", "limits.memory": "1Gi"}
    wait_for(lambda: (api.get(f"/api/v1/namespaces/{namespace}/resourcequotas/q").json().get("status") or {})
             .get("used"), 30, what="status.used")
    got = lines(kubectl.run("get", "quota").ok().stdout)
    assert got[0] == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert got[1][0] == "q" and got[1][2:] == ["pods:", "0/2,", "requests.cpu:", "0/1", "limits.memory:", "0/1Gi"]
    described = kubectl.run("describe", "quota", "q").ok().stdout
    assert lines(described) == [["Name:", "q"], ["Namespace:", namespace], ["Resource", "Used", "Hard"],
                                ["--------", "----", "----"], ["limits.memory", "0", "1Gi"],
                                ["pods", "0", "2"], ["requests.cpu", "0", "1"]]
    # the quota at work, as kubectl prints the refusal
    r = kubectl.run("run", "bare", "--image=busybox:1.36", "--restart=Never")
    assert r.returncode != 0
    assert ('Error from server (Forbidden): pods "bare" is forbidden: failed quota: q: must specify limits.memory '
            'for: bare; requests.cpu for: bare') in r.stderr
    bad = kubectl.run("create", "quota", "bad", "--hard=pods=lots")
    assert bad.returncode != 0


def test_describe_limitrange(kubectl: Kubectl, api: httpx.Client, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "lr.yaml"
    manifest.write_text("apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: limits\nspec:\n  limits:\n"
                        "  - type: Container\n    max: {cpu: '1'}\n    min: {cpu: 50m}\n"
                        "    default: {cpu: 500m}\n    defaultRequest: {cpu: 100m}\n")
    kubectl.run("apply", "-f", str(manifest)).ok()
    got = lines(kubectl.run("get", "limits").ok().stdout)
    assert got[0] == ["NAME", "CREATED", "AT"] and got[1][0] == "limits"
    described = lines(kubectl.run("describe", "limitrange", "limits").ok().stdout)
    assert described[:2] == [["Name:", "limits"], ["Namespace:", namespace]]
    assert ["Type", "Resource", "Min", "Max", "Default", "Request", "Default", "Limit", "Max", "Limit/Request",
            "Ratio"] in described
    assert ["Container", "cpu", "50m", "1", "100m", "500m", "-"] in described


def test_create_priorityclass(kubectl: Kubectl, api: httpx.Client) -> None:  # noqa: F811
    name = f"kc-{uuid.uuid4().hex[:6]}"
    try:
        r = kubectl.run("create", "priorityclass", name, "--value=1000", "--description=high",
                        "--preemption-policy=Never", "-v=8").ok()
        assert r.stdout.strip() == f"priorityclass.scheduling.k8s.io/{name} created"
        assert (PROTOBUF in r.stderr) == (kubectl.version == "1.33")
        pc = api.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}").json()
        assert pc["value"] == 1000 and pc["description"] == "high" and pc["preemptionPolicy"] == "Never"
        got = lines(kubectl.run("get", "pc", name).ok().stdout)
        assert got[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
        assert got[1][:3] == [name, "1000", "false"] and got[1][-1] == "Never"
        zero = kubectl.run("create", "priorityclass", f"{name}-zero", "--value=0").ok()
        assert "created" in zero.stdout
        assert api.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}-zero").json()["value"] == 0
        denied = kubectl.run("create", "priorityclass", "system-x", "--value=5")
        assert denied.returncode != 0
        assert ("priority class names with 'system-' prefix are reserved for system use only. error: system-x is not "
                "a known system priority class") in denied.stderr
    finally:
        api.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        api.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}-zero")


def test_get_and_scale_rc(kubectl: Kubectl, api: httpx.Client, namespace: str, tmp_path: Path,  # noqa: F811
                          controllers: ControllerProcess) -> None:
    manifest = tmp_path / "rc.yaml"
    manifest.write_text("apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: web\nspec:\n  replicas: 2\n"
                        "  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n"
                        "      - {name: c, image: 'busybox:1.36'}\n")
    assert kubectl.run("apply", "-f", str(manifest)).ok().stdout.strip() == "replicationcontroller/web created"
    wait_for(lambda: len(api.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]) == 2, 30, what="2 pods")
    got = lines(kubectl.run("get", "rc").ok().stdout)
    assert got[0][:4] == ["NAME", "DESIRED", "CURRENT", "READY"]
    assert got[1][:4] == ["web", "2", "2", "0"]
    assert kubectl.run("scale", "rc", "web", "--replicas=3").ok().stdout.strip() == \
        "replicationcontroller/web scaled"
    wait_for(lambda: len(api.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]) == 3, 30, what="3 pods")
    assert "web" in kubectl.run("get", "all").ok().stdout


def test_official_python_client_creates_an_rc(apiserver: ApiServer, api: httpx.Client, namespace: str,
                                              controllers: ControllerProcess) -> None:
    client = pytest.importorskip("kubernetes.client")
    configuration = client.Configuration()
    configuration.host = apiserver.url
    with client.ApiClient(configuration) as api_client:
        core = client.CoreV1Api(api_client)
        body = client.V1ReplicationController(
            metadata=client.V1ObjectMeta(name="frontend"),
            spec=client.V1ReplicationControllerSpec(
                replicas=2, selector={"name": "frontend"},
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels={"name": "frontend"}),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]))))
        created = core.create_namespaced_replication_controller(namespace, body)
        assert created.spec.replicas == 2 and created.status.replicas == 0
        wait_for(lambda: core.read_namespaced_replication_controller_status("frontend", namespace).status.replicas
                 == 2, 30, what="status.replicas 2")
        listed = core.list_namespaced_replication_controller(namespace)
        assert [rc.metadata.name for rc in listed.items] == ["frontend"]
        core.delete_namespaced_replication_controller("frontend", namespace)


def test_mkubectl_describes_as_kubectl_133(apiserver: ApiServer, api: httpx.Client, namespace: str, tmp_path: Path,
                                           controllers: ControllerProcess) -> None:
    """mkubectl's describe of a quota (with scopes), a LimitRange and their namespace: kubectl 1.33's text."""
    from tests.integration.test_mkubectl import Mk
    from tests.kubectl import find_kubectl

    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed")
    real = Kubectl(binary, "1.33", apiserver.url, tmp_path / "kubectl", namespace)
    mk = Mk(apiserver.url, tmp_path / "mk", namespace)
    quotas = f"/api/v1/namespaces/{namespace}/resourcequotas"
    assert api.post(quotas, json={"metadata": {"name": "compute"}, "spec": {
        "hard": {"requests.cpu": "2", "limits.memory": "1Gi", "pods": "4"}}}).status_code == 201
    assert api.post(quotas, json={"metadata": {"name": "best-effort"}, "spec": {
        "hard": {"pods": "3"}, "scopes": ["BestEffort"]}}).status_code == 201
    assert api.post(f"/api/v1/namespaces/{namespace}/limitranges", json={"metadata": {"name": "limits"}, "spec": {
        "limits": [{"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "500m"}},
                   {"type": "Pod", "max": {"memory": "2Gi"}}]}}).status_code == 201
    for name in ("compute", "best-effort"):
        wait_for(lambda n=name: (api.get(f"{quotas}/{n}").json().get("status") or {}).get("used"), 30,
                 what=f"status of {name}")
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": {
        "requests": {"cpu": "250m"}, "limits": {"memory": "256Mi", "cpu": "500m"}}}]}}
    assert api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
    for args in (("describe", "quota", "compute"), ("describe", "quota", "best-effort"),
                 ("describe", "limitrange", "limits"), ("describe", "namespace", namespace)):
        expected = real.run(*args).ok().stdout
        assert mk.run(*args).ok().stdout == expected, args
    assert "Resource Quotas" in real.run("describe", "namespace", namespace).stdout


def test_cluster_info_finds_the_control_plane(kubectl: Kubectl, apiserver: ApiServer) -> None:  # noqa: F811
    """`kubectl cluster-info` reads the `kubernetes` Service in default (the apiserver keeps it) and the
    cluster-service Services of kube-system; it failed before the Service existed."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", kubectl.run("cluster-info").ok().stdout)  # kubectl colours it always
    assert f"Kubernetes control plane is running at {apiserver.url}" in out
    assert "To further debug and diagnose cluster problems, use 'kubectl cluster-info dump'." in out
