"""The road of a real Deployment (issue 15), end to end: a secure cluster of real processes (etcd, the apiserver
with its gate, the controller-manager's deployment, replicaset and garbage-collector controllers as their service
accounts, the scheduler as system:kube-scheduler, two kubelets on the Docker shim as system:node:NAME) whose
components all export their spans (`--tracing-config-file`) to `python -m road`. A 3-replica Deployment is applied
with mkubectl as kubernetes-admin; its road, read through the apiserver, has for every pod, in causal order and
with the right identity: the apply request, the ReplicaSet's creation by the deployment controller, the pod's
creation by the replicaset controller, the scheduler's cycle and bind (the binding POST as system:kube-scheduler),
and on the pod's own node its sandbox, its container's start and the status write that made it Ready.

The same road as a web page (road/page.py) in a real browser (Debian's chromium through selenium), reached as
a user reaches it, through real `kubectl proxy`: it loads, draws the lanes and the nodes with their pods' IPs,
receives the steps of a rollout live without a reload, replays with its slider, and leaves a screenshot in
_output/test-artifacts/road-page.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import REPO, free_port, wait_for
from tests.kubectl import find_kubectl
from tests.road_process import ROAD
from tests.secure_cluster import SecureCluster

COMPONENTS = ("apiserver", "controllers", "scheduler", "kubelet")
ADMIN = "kubernetes-admin"
DEPLOYMENT_CONTROLLER = "system:serviceaccount:kube-system:deployment-controller"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
SCHEDULER = "system:kube-scheduler"
NAME = "road-web"
REPLICAS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[SecureCluster]:
    cluster = SecureCluster(2, "road", proxy=False, scheduler=True, road=True,
                            controllers=("deployment", "replicaset", "garbagecollector", "serviceaccount",
                                         "root-ca-cert-publisher"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def manifest() -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {NAME}
spec:
  replicas: {REPLICAS}
  selector:
    matchLabels: {{app: {NAME}}}
  template:
    metadata:
      labels: {{app: {NAME}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: minik8s/httpd:1
        imagePullPolicy: Never
        readinessProbe:
          httpGet: {{path: /, port: 80}}
          periodSeconds: 1
"""


def flatten(road: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(road["steps"])
    for child in road["roads"]:
        out += flatten(child)
    return out


def first(steps: list[dict[str, Any]], span: str, **where: Any) -> dict[str, Any] | None:
    """The earliest step of this span whose details (or step fields) match `where`."""
    for step in sorted(steps, key=lambda s: s["offset"]):
        if step.get("span") != span:
            continue
        if all(step.get(k, step["details"].get(k)) == v for k, v in where.items()):
            return step
    return None


def pod_road(steps: list[dict[str, Any]], node: str) -> list[dict[str, Any]] | None:
    """The steps every pod's road must have, in causal order; None while one is missing."""
    want = [
        first(steps, "apiserver.request", lane=REPLICASET_CONTROLLER, **{"http.request.method": "POST"}),
        first(steps, "scheduler.schedule_pod", lane="kube-scheduler"),
        first(steps, "apiserver.request", lane=SCHEDULER),
        first(steps, "kubelet.run_pod_sandbox", lane=f"kubelet/{node}"),
        first(steps, "kubelet.start_container", lane=f"kubelet/{node}"),
        first(steps, "kubelet.status", lane=f"kubelet/{node}", **{"k8s.pod.ready": "true"}),
    ]
    return None if any(s is None for s in want) else want  # type: ignore[return-value]


def test_the_road_of_a_three_replica_deployment(cluster: SecureCluster) -> None:
    applied = subprocess.run([sys.executable, "-m", "kubectl", "--kubeconfig", str(cluster.pki.kubeconfig("admin")),
                              "apply", "-f", "-"], input=manifest(), capture_output=True, text=True, cwd=REPO,
                             timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert applied.returncode == 0, applied.stderr
    with cluster.client() as admin:
        def ready_pods() -> list[dict[str, Any]] | None:
            pods = admin.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"app={NAME}"}).json()
            ready = [p for p in pods["items"] if any(c["type"] == "Ready" and c["status"] == "True"
                                                     for c in p.get("status", {}).get("conditions") or ())]
            return ready if len(ready) == REPLICAS else None

        pods = wait_for(ready_pods, 180, 0.5, what=f"{REPLICAS} Ready pods")

        def complete() -> dict[str, Any] | None:
            r = admin.get(f"{ROAD}/namespaces/default/deployments/{NAME}")
            assert r.status_code == 200, r.text
            road = r.json()
            rs = road["roads"]
            if len(rs) != 1 or len(rs[0]["roads"]) != REPLICAS:
                return None
            nodes = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}  # type: ignore[union-attr]
            for pod in rs[0]["roads"]:
                if pod_road(pod["steps"], nodes[pod["object"]["uid"]]) is None:
                    return None
            return road

        road = wait_for(complete, 60, 0.5, what="every pod's steps in the Deployment's road")
    apply = first(road["steps"], "apiserver.request", lane=ADMIN, **{"http.request.method": "POST"})
    assert apply is not None and apply["details"].get("k8s.field_manager") == "kubectl-client-side-apply"
    rs = road["roads"][0]
    created_rs = first(rs["steps"], "apiserver.request", lane=DEPLOYMENT_CONTROLLER)
    assert created_rs is not None and created_rs["offset"] > apply["offset"]
    nodes = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}  # type: ignore[union-attr]
    for pod in rs["roads"]:
        node = nodes[pod["object"]["uid"]]
        steps = pod_road(pod["steps"], node)
        assert steps is not None
        offsets = [s["offset"] for s in steps]
        assert offsets == sorted(offsets), [(s["step"], s["offset"]) for s in steps]
        assert steps[0]["offset"] > created_rs["offset"]
        assert steps[1]["details"].get("k8s.scheduler.selected_node") == node
    assert all(s["lane"] for s in flatten(road))


# -- the page, in a real browser -------------------------------------------------------------------------

ARTIFACTS = REPO / "_output" / "test-artifacts"
PAGE_NAME = "road-page"


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (hack/setup.sh installs them)")
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(driver))


def test_the_road_page_in_a_browser_follows_a_rollout_live(cluster: SecureCluster, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    kubectl = find_kubectl("1.33")
    if kubectl is None:
        pytest.skip("kubectl.1.33 is not installed")
    admin_conf = str(cluster.pki.kubeconfig("admin"))
    applied = subprocess.run([str(kubectl), "--kubeconfig", admin_conf, "apply", "-f", "-"],
                             input=manifest().replace(NAME, PAGE_NAME).replace(f"replicas: {REPLICAS}", "replicas: 2"),
                             capture_output=True, text=True, timeout=60)
    assert applied.returncode == 0, applied.stderr
    port = free_port()
    proxy = subprocess.Popen([str(kubectl), "--kubeconfig", admin_conf, "proxy", f"--port={port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = None
    try:
        url = f"http://127.0.0.1:{port}{ROAD}/namespaces/default/deployments/{PAGE_NAME}"

        def page_served() -> bool:
            try:
                r = httpx.get(url, headers={"Accept": "text/html"}, timeout=5, trust_env=False)
            except httpx.HTTPError:
                return False
            return r.status_code == 200 and "<title>road</title>" in r.text

        wait_for(page_served, 20, 0.2, what="the road page through kubectl proxy")
        driver = browser()
        driver.get(url)

        def lanes() -> list[str]:
            return [e.get_attribute("data-lane") for e in driver.find_elements(By.CSS_SELECTOR, ".lane")]

        def pods_with_ips() -> dict[str, str] | None:
            pods = {e.get_attribute("data-pod"): e.text.split("\n")[-1]
                    for e in driver.find_elements(By.CSS_SELECTOR, ".node .pod")}
            return pods if len(pods) == 2 and all(ip.count(".") == 3 for ip in pods.values()) else None

        wait_for(lambda: ADMIN in lanes() and "kube-scheduler" in lanes(), 60, 0.25, what="the page's lanes")
        pods = wait_for(pods_with_ips, 120, 0.5, what="two pods with IPs in the node boxes")
        with cluster.client() as admin:
            live = admin.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"app={PAGE_NAME}"}).json()
            ips = {p["metadata"]["name"]: p["status"].get("podIP") for p in live["items"]}
        assert all(ips.get(name) == ip for name, ip in pods.items()), (pods, ips)
        assert any(lane.startswith("kubelet/") for lane in lanes())

        def step_count() -> int:
            return len(driver.find_elements(By.CSS_SELECTOR, ".step"))

        before = step_count()
        # a rollout while the page is open: its steps arrive through the watch, no reload
        restarted = subprocess.run([str(kubectl), "--kubeconfig", admin_conf, "rollout", "restart",
                                    f"deployment/{PAGE_NAME}"], capture_output=True, text=True, timeout=60)
        assert restarted.returncode == 0, restarted.stderr
        wait_for(lambda: len(driver.find_elements(By.CSS_SELECTOR, ".node .pod")) >= 3, 120, 0.5,
                 what="the rollout's new pods on the page, live")
        assert step_count() > before
        assert driver.execute_script("return performance.getEntriesByType('navigation').length") == 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(ARTIFACTS / "road-page.png"))
        # the slider replays: at 0 s only the first steps show
        shown = len(driver.find_elements(By.CSS_SELECTOR, ".step:not(.hidden)"))
        driver.execute_script("const s = document.getElementById('slider'); s.value = 0;"
                              "s.dispatchEvent(new Event('input'));")
        wait_for(lambda: len(driver.find_elements(By.CSS_SELECTOR, ".step:not(.hidden)")) < shown, 5, 0.1,
                 what="the slider at 0 to hide the later steps")
        assert not driver.find_element(By.ID, "follow").is_selected()
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
                  and "favicon" not in e["message"]]
        assert errors == []
        # a road of nothing: the page says NotFound as the API does
        driver.get(f"http://127.0.0.1:{port}{ROAD}/namespaces/default/deployments/nothing-here")
        wait_for(lambda: driver.find_element(By.ID, "phase").text == "NotFound", 15, 0.2, what="NotFound shown")
        assert 'deployments.apps "nothing-here" not found' in driver.find_element(By.ID, "error").text
    finally:
        if driver is not None:
            driver.quit()
        proxy.terminate()
        proxy.wait(10)
