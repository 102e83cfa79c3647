"""PodDisruptionBudgets and the pods/eviction subresource on the session's real etcd and apiserver, no
controllers: each budget's status is written through /status as the disruption controller would, so
every branch of upstream's EvictionREST is reached on purpose. Pods are made Running and Ready through
/status (no kubelet), so their budgets count."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

JSONDict = dict[str, Any]
POLICY = "/apis/policy/v1"
MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def pdb(name: str, **spec: Any) -> JSONDict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def make_pdb(api: httpx.Client, ns: str, name: str, **spec: Any) -> JSONDict:
    r = api.post(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets", json=pdb(name, **spec))
    assert r.status_code == 201, r.text
    return r.json()


def set_pdb_status(api: httpx.Client, ns: str, name: str, **status: Any) -> JSONDict:
    current = api.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets/{name}").json()
    current["status"] = {"observedGeneration": current["metadata"]["generation"], "disruptionsAllowed": 0,
                         "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0, **status}
    r = api.put(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets/{name}/status", json=current)
    assert r.status_code == 200, r.text
    return r.json()


def make_pod(api: httpx.Client, ns: str, name: str, phase: str = "Running", ready: bool = True,
             labels: JSONDict | None = None, node: str | None = None) -> JSONDict:
    body: JSONDict = {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "labels": labels or {"app": "web"}},
                      "spec": {"containers": [{"name": "c", "image": "minik8s/busybox:1.35"}]}}
    if node:
        body["spec"].update(nodeName=node, terminationGracePeriodSeconds=30)
    r = api.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert r.status_code == 201, r.text
    pod = r.json()
    pod["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    r = api.put(f"/api/v1/namespaces/{ns}/pods/{name}/status", json=pod)
    assert r.status_code == 200, r.text
    return r.json()


def evict(api: httpx.Client, ns: str, name: str, api_version: str = "policy/v1", **options: Any) -> httpx.Response:
    body: JSONDict = {"apiVersion": api_version, "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    if options:
        body["deleteOptions"] = options
    return api.post(f"/api/v1/namespaces/{ns}/pods/{name}/eviction", json=body)


def pod_exists(api: httpx.Client, ns: str, name: str) -> bool:
    return api.get(f"/api/v1/namespaces/{ns}/pods/{name}").status_code == 200


def test_discovery_lists_pdbs_and_eviction(api: httpx.Client) -> None:
    core = {r["name"]: r for r in api.get("/api/v1").json()["resources"]}
    assert core["pods/eviction"] | {} == {**core["pods/eviction"], "kind": "Eviction", "group": "policy",
                                          "version": "v1", "verbs": ["create"]}
    policy = {r["name"]: r for r in api.get(POLICY).json()["resources"]}
    assert policy["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    assert policy["poddisruptionbudgets"]["namespaced"] is True
    assert "poddisruptionbudgets/status" in policy


def test_pdb_create_defaults_status_and_prints_upstream_columns(api: httpx.Client, namespace: str) -> None:
    created = make_pdb(api, namespace, "web", minAvailable=2)
    assert created["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                                 "expectedPods": 0}
    assert created["metadata"]["generation"] == 1
    make_pdb(api, namespace, "db", maxUnavailable="50%")
    table = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets",
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Min Available", "Max Unavailable",
                                                               "Allowed Disruptions", "Age"]
    rows = {r["cells"][0]: r["cells"][1:4] for r in table["rows"]}
    assert rows == {"web": ["2", "N/A", 0], "db": ["N/A", "50%", 0]}
    # a spec update keeps the status (written only through /status) and bumps the generation
    set_pdb_status(api, namespace, "web", disruptionsAllowed=1)
    current = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web").json()
    current["spec"]["minAvailable"] = 1
    current["status"] = {"disruptionsAllowed": 99}
    r = api.put(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web", json=current)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["disruptionsAllowed"] == 1 and r.json()["metadata"]["generation"] == 2


@pytest.mark.parametrize(("spec", "field", "says"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec", "minAvailable and maxUnavailable cannot be both set"),
    ({"minAvailable": -1}, "spec.minAvailable", "must be greater than or equal to 0"),
    ({"maxUnavailable": "150%"}, "spec.maxUnavailable", "must not be greater than 100%"),
    ({"minAvailable": "half"}, "spec.minAvailable", "a valid percent string must be a numeric string followed by "
                                                    "an ending '%'"),
    ({"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"}, "spec.unhealthyPodEvictionPolicy",
     'Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"'),
])
def test_pdb_bad_input_is_422(api: httpx.Client, namespace: str, spec: JSONDict, field: str, says: str) -> None:
    r = api.post(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets", json=pdb("bad", **spec))
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('PodDisruptionBudget.policy "bad" is invalid: ')
    assert says in status["message"]
    assert field in [c["field"] for c in status["details"]["causes"]]
    assert api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/bad").status_code == 404


def test_negative_status_is_refused(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "web", minAvailable=1)
    current = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web").json()
    current["status"]["disruptionsAllowed"] = -1
    r = api.put(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web/status", json=current)
    assert r.status_code == 422, r.text
    assert "status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0" in r.json()["message"]


def test_eviction_of_a_missing_pod_is_404(api: httpx.Client, namespace: str) -> None:
    r = evict(api, namespace, "ghost")
    assert r.status_code == 404, r.text
    assert r.json()["message"] == 'pods "ghost" not found'


def test_eviction_name_must_match_the_url(api: httpx.Client, namespace: str) -> None:
    make_pod(api, namespace, "p")
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}
    r = api.post(f"/api/v1/namespaces/{namespace}/pods/p/eviction", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["message"] == "name in URL does not match name in Eviction object"
    assert pod_exists(api, namespace, "p")


def test_no_budget_evicts_at_once(api: httpx.Client, namespace: str) -> None:
    make_pod(api, namespace, "p")
    r = evict(api, namespace, "p", api_version="policy/v1beta1")
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "Success"
    assert not pod_exists(api, namespace, "p")


def test_budget_exhausted_is_429_and_budget_spent_once(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "web", minAvailable=1)
    for name in ("a", "b"):
        make_pod(api, namespace, name)
    set_pdb_status(api, namespace, "web", disruptionsAllowed=1, currentHealthy=2, desiredHealthy=1, expectedPods=2)
    # a dry run spends nothing and deletes nothing
    assert evict(api, namespace, "a", dryRun=["All"]).status_code == 201
    assert pod_exists(api, namespace, "a")
    r = evict(api, namespace, "a")
    assert r.status_code == 201, r.text
    budget = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web").json()
    assert budget["status"]["disruptionsAllowed"] == 0
    assert list(budget["status"]["disruptedPods"]) == ["a"]
    cond = next(c for c in budget["status"]["conditions"] if c["type"] == "DisruptionAllowed")
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")
    r = evict(api, namespace, "b")
    assert r.status_code == 429, r.text
    status = r.json()
    assert status["reason"] == "TooManyRequests" and status["message"] == MESSAGE
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget web "
                                            "needs 1 healthy pods and has 2 currently"}]
    assert pod_exists(api, namespace, "b")


def test_unobserved_budget_is_429_with_retry_after(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "web", maxUnavailable=1)
    make_pod(api, namespace, "a")
    r = evict(api, namespace, "a")
    assert r.status_code == 429, r.text
    assert r.json()["details"]["retryAfterSeconds"] == 10
    assert "is still being processed by the server" in r.json()["details"]["causes"][0]["message"]


def test_terminal_and_pending_pods_ignore_the_budget(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "web", minAvailable=5)
    set_pdb_status(api, namespace, "web", disruptionsAllowed=0, currentHealthy=1, desiredHealthy=5)
    make_pod(api, namespace, "done", phase="Succeeded", ready=False)
    make_pod(api, namespace, "waiting", phase="Pending", ready=False)
    for name in ("done", "waiting"):
        assert evict(api, namespace, name).status_code == 201
        assert not pod_exists(api, namespace, name)


def test_unhealthy_pod_eviction_policy(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "web", minAvailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")
    set_pdb_status(api, namespace, "web", disruptionsAllowed=0, currentHealthy=0, desiredHealthy=1)
    make_pod(api, namespace, "sick", ready=False)
    assert evict(api, namespace, "sick").status_code == 201
    assert not pod_exists(api, namespace, "sick")
    # IfHealthyBudget (the default): a not-Ready pod of a budget that is not healthy is refused
    make_pdb(api, namespace, "db", minAvailable=1, selector={"matchLabels": {"app": "db"}})
    set_pdb_status(api, namespace, "db", disruptionsAllowed=0, currentHealthy=0, desiredHealthy=1)
    make_pod(api, namespace, "db-0", ready=False, labels={"app": "db"})
    assert evict(api, namespace, "db-0").status_code == 429
    # ... and allowed, without spending the budget, once the budget is healthy
    set_pdb_status(api, namespace, "db", disruptionsAllowed=0, currentHealthy=1, desiredHealthy=1)
    assert evict(api, namespace, "db-0").status_code == 201
    assert not pod_exists(api, namespace, "db-0")


def test_more_than_one_budget_is_500(api: httpx.Client, namespace: str) -> None:
    make_pdb(api, namespace, "one", minAvailable=0)
    make_pdb(api, namespace, "two", maxUnavailable=1)
    make_pod(api, namespace, "a")
    r = evict(api, namespace, "a")
    assert r.status_code == 500, r.text
    assert r.json()["message"] == ("Internal error occurred: This pod has more than one PodDisruptionBudget, which "
                                   "the eviction subresource does not support.")
    assert pod_exists(api, namespace, "a")


def test_delete_options_preconditions_and_disruption_target(api: httpx.Client, namespace: str) -> None:
    pod = make_pod(api, namespace, "a")
    r = evict(api, namespace, "a", preconditions={"uid": "not-the-uid"})
    assert r.status_code == 409, r.text
    assert "Precondition failed: UID in precondition: not-the-uid" in r.json()["message"]
    r = evict(api, namespace, "a", preconditions={"resourceVersion": "1"})
    assert r.status_code == 409, r.text
    assert pod_exists(api, namespace, "a")
    r = evict(api, namespace, "a", preconditions={"uid": pod["metadata"]["uid"]})
    assert r.status_code == 201, r.text
    assert not pod_exists(api, namespace, "a")


def test_evicted_pod_gets_disruption_target_and_the_grace_asked(api: httpx.Client, namespace: str) -> None:
    make_pod(api, namespace, "bound", node="far-away")
    r = evict(api, namespace, "bound", gracePeriodSeconds=7)
    assert r.status_code == 201, r.text
    pod = api.get(f"/api/v1/namespaces/{namespace}/pods/bound").json()  # held by its (absent) kubelet
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "EvictionByEvictionAPI",
                                                                 "Eviction API: evicting")
    # evicting a terminating pod again needs no budget and changes nothing
    assert evict(api, namespace, "bound").status_code == 201
    api.delete(f"/api/v1/namespaces/{namespace}/pods/bound", params={"gracePeriodSeconds": 0})


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_apply_create_get_and_describe_pdb(api: httpx.Client, namespace: str, apiserver: Any,
                                                    tmp_path: Any, version: str) -> None:
    from tests.kubectl import Kubectl, find_kubectl

    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed")
    kubectl = Kubectl(binary, version, apiserver.url, tmp_path / "kubectl", namespace)
    manifest = ("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: applied\nspec:\n"
                "  maxUnavailable: 25%\n  selector:\n    matchLabels:\n      app: web\n")
    assert kubectl.run("apply", "-f", "-", stdin=manifest).ok().stdout.strip() == \
        "poddisruptionbudget.policy/applied created"
    # `create pdb` is a typed create (protobuf from kubectl 1.32 on)
    assert kubectl.run("create", "pdb", "made", "--selector=app=db", "--min-available=1").ok().stdout.strip() == \
        "poddisruptionbudget.policy/made created"
    made = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/made").json()
    assert made["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    bad = kubectl.run("create", "pdb", "both", "--selector=app=db", "--min-available=1", "--max-unavailable=1")
    assert bad.returncode != 0  # kubectl refuses it before the server: one of the two
    rows = kubectl.run("get", "pdb").ok().stdout.splitlines()
    assert rows[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert sorted(r.split()[:4] for r in rows[1:]) == [["applied", "N/A", "25%", "0"], ["made", "1", "N/A", "0"]]
    described = kubectl.run("describe", "pdb", "applied").ok().stdout
    assert "Max unavailable:  25%" in described and "Selector:         app=web" in described
    if version == "1.33":  # mkubectl describes and lists as kubectl 1.33
        from tests.integration.test_mkubectl import Mk, same_output

        mk = Mk(apiserver.url, tmp_path / "mk", namespace)
        for name in ("applied", "made"):
            same_output(mk, kubectl, "describe", "pdb", name)
        same_output(mk, kubectl, "get", "pdb")
    missing = kubectl.run("drain", "no-such-node")
    assert missing.returncode != 0 and 'nodes "no-such-node" not found' in missing.stderr


@pytest.mark.kubectl
def test_drain_timeout_reads_as_kubectl_1_33(api: httpx.Client, namespace: str, apiserver: Any, tmp_path: Any
                                             ) -> None:
    """A budget that allows nothing and a pod that will not go: `drain --timeout=3s` gives up after its 5 s
    retry, naming the pod left, in the same words from mkubectl and kubectl 1.33."""
    from tests.integration.test_mkubectl import Mk
    from tests.kubectl import Kubectl, find_kubectl

    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl 1.33 is not installed")
    node = f"n-{namespace}"
    assert api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
                    ).status_code == 201
    try:
        make_pdb(api, namespace, "web", minAvailable=1)
        set_pdb_status(api, namespace, "web", disruptionsAllowed=0, currentHealthy=1, desiredHealthy=1,
                       expectedPods=1)
        make_pod(api, namespace, "a", node=node)
        kubectl = Kubectl(binary, "1.33", apiserver.url, tmp_path / "kubectl", namespace)
        mk = Mk(apiserver.url, tmp_path / "mk", namespace)
        ours = mk.run("drain", node, "--force", "--timeout=3s")
        theirs = kubectl.run("drain", node, "--force", "--timeout=3s")
        assert ours.returncode == theirs.returncode == 1
        assert ours.stderr == theirs.stderr, (ours, theirs)
        assert ours.stdout.splitlines()[1:] == theirs.stdout.splitlines()[1:] == [f"evicting pod {namespace}/a"] * 2
        assert f'error when evicting pods/"a" -n "{namespace}": global timeout reached: 3s' in ours.stderr
        assert api.get(f"/api/v1/namespaces/{namespace}/pods/a").status_code == 200
    finally:
        api.delete(f"/api/v1/nodes/{node}")


def test_concurrent_evictions_spend_the_budget_once(api: httpx.Client, namespace: str, apiserver: Any) -> None:
    """Six evictions at once against a budget allowing 2: the status writes race on the budget's
    resourceVersion and are re-read and retried, so exactly 2 pods go and 4 evictions get 429."""
    from concurrent.futures import ThreadPoolExecutor

    names = [f"p{i}" for i in range(6)]
    make_pdb(api, namespace, "web", minAvailable=4)
    for name in names:
        make_pod(api, namespace, name)
    set_pdb_status(api, namespace, "web", disruptionsAllowed=2, currentHealthy=6, desiredHealthy=4, expectedPods=6)

    def one(name: str) -> int:
        with httpx.Client(base_url=apiserver.url, timeout=30) as client:
            return evict(client, namespace, name).status_code

    with ThreadPoolExecutor(len(names)) as pool:
        codes = list(pool.map(one, names))
    assert sorted(codes) == [201, 201, 429, 429, 429, 429], codes
    budget = api.get(f"{POLICY}/namespaces/{namespace}/poddisruptionbudgets/web").json()["status"]
    assert budget["disruptionsAllowed"] == 0
    gone = {n for n, c in zip(names, codes, strict=True) if c == 201}
    assert set(budget["disruptedPods"]) == gone
    assert {n for n in names if not pod_exists(api, namespace, n)} == gone


@pytest.mark.kubectl
def test_drain_disable_eviction_pod_selector_and_grace_as_kubectl_1_33(api: httpx.Client, namespace: str,
                                                                       apiserver: Any, tmp_path: Any) -> None:
    """`--disable-eviction` deletes past a budget that allows nothing, `--pod-selector` keeps the other pods,
    `--grace-period=0` removes at once: the same lines from mkubectl (on one node) and kubectl 1.33 (on its twin)."""
    from tests.integration.test_mkubectl import Mk
    from tests.kubectl import Kubectl, find_kubectl

    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl 1.33 is not installed")
    make_pdb(api, namespace, "web", minAvailable=2)
    set_pdb_status(api, namespace, "web", disruptionsAllowed=0, currentHealthy=2, desiredHealthy=2, expectedPods=2)
    runners = {"mk": Mk(apiserver.url, tmp_path / "mk", namespace),
               "kubectl": Kubectl(binary, "1.33", apiserver.url, tmp_path / "kubectl", namespace)}
    outputs = {}
    try:
        for who, runner in runners.items():
            node = f"{who}-{namespace}"
            assert api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
                            ).status_code == 201
            make_pod(api, namespace, f"web-{who}", node=node)
            make_pod(api, namespace, f"other-{who}", node=node, labels={"app": "other"})
            result = runner.run("drain", node, "--force", "--disable-eviction", "--grace-period=0",
                                "--pod-selector=app=web", "--timeout=30s").ok()
            outputs[who] = (result.stdout + result.stderr).replace(who, "WHO")
            assert not pod_exists(api, namespace, f"web-{who}") and pod_exists(api, namespace, f"other-{who}")
        assert outputs["mk"] == outputs["kubectl"]
        assert "pod/web-WHO deleted" in outputs["mk"]
    finally:
        for who in runners:
            api.delete(f"/api/v1/nodes/{who}-{namespace}")


@pytest.mark.kubectl
def test_drain_skips_pods_deleted_long_ago_as_kubectl_1_33(api: httpx.Client, namespace: str, apiserver: Any,
                                                          tmp_path: Any) -> None:
    """A pod terminating for more than --skip-wait-for-delete-timeout seconds (its kubelet is gone) is left to
    itself: drain succeeds at once, from mkubectl and from kubectl 1.33 alike."""
    from machinery.timeutil import now, parse_rfc3339
    from tests.cluster import wait_for
    from tests.integration.test_mkubectl import Mk
    from tests.kubectl import Kubectl, find_kubectl

    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl 1.33 is not installed")
    node = f"n-{namespace}"
    assert api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
                    ).status_code == 201
    try:
        make_pod(api, namespace, "stuck", node=node)
        r = api.delete(f"/api/v1/namespaces/{namespace}/pods/stuck", params={"gracePeriodSeconds": 1})
        assert r.status_code == 200 and r.json()["metadata"]["deletionTimestamp"]
        deleted = parse_rfc3339(r.json()["metadata"]["deletionTimestamp"])
        assert deleted is not None
        wait_for(lambda: (now() - deleted).total_seconds() > 2, 10, 0.1,
                 what="the deletion older than the 1 s the flag allows")
        outputs = []
        for runner in (Mk(apiserver.url, tmp_path / "mk", namespace),
                       Kubectl(binary, "1.33", apiserver.url, tmp_path / "kubectl", namespace)):
            result = runner.run("drain", node, "--force", "--skip-wait-for-delete-timeout=1", "--timeout=20s").ok()
            outputs.append(result.stdout.splitlines()[1:] + result.stderr.splitlines())
        assert outputs[0] == outputs[1] == [f"node/{node} drained"]
        assert pod_exists(api, namespace, "stuck")
    finally:
        api.delete(f"/api/v1/nodes/{node}")
        api.delete(f"/api/v1/namespaces/{namespace}/pods/stuck", params={"gracePeriodSeconds": 0})
