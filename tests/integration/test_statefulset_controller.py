"""The StatefulSet controller over HTTPS with RBAC: it writes as
system:serviceaccount:kube-system:statefulset-controller and its bootstrap role lets it make pods, claims (and their
owner references), revisions, status and events, never denied (the audit log says who wrote what). No kubelet:
the pods stay Pending, the Parallel policy makes them all. Whole-cluster behaviour (ordering, DNS, updates,
kubectl) is tests/e2e/test_statefulsets.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.cluster import Etcd, make_workdir, wait_for
from tests.controller_process import ControllerProcess


def test_the_controller_writes_as_its_service_account_under_rbac(workdir: Path) -> None:
    from apiserver.audit import filter_events
    from tests.auth_cluster import SecureApiServer

    folder = make_workdir("minik8s-sts-rbac-")
    etcd = Etcd(folder)
    etcd.start()
    secure = SecureApiServer(folder, etcd)
    controllers = ControllerProcess(folder, secure.secure_url, ["statefulset"],
                                    "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    labels = {"app": "secured"}
    body = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "secured"},
            "spec": {"replicas": 2, "serviceName": "secured", "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": labels},
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                         "resources": {"requests": {"storage": "1Gi"}}}}],
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "c", "image": "busybox",
                                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}}
    try:
        secure.start()
        controllers.start()
        with secure.client("admin") as admin:
            r = admin.post("/apis/apps/v1/namespaces/default/statefulsets", json=body)
            assert r.status_code == 201, r.text
            uid = r.json()["metadata"]["uid"]

            def written() -> bool:
                sts = admin.get("/apis/apps/v1/namespaces/default/statefulsets/secured").json()
                pods = admin.get("/api/v1/namespaces/default/pods").json()["items"]
                claims = admin.get("/api/v1/namespaces/default/persistentvolumeclaims").json()["items"]
                revisions = admin.get("/apis/apps/v1/namespaces/default/controllerrevisions").json()["items"]
                owned = [c for c in claims if any(ref["uid"] == uid for ref in c["metadata"].get("ownerReferences")
                                                  or [])]
                return (sts.get("status", {}).get("replicas") == 2 and len(pods) == 2 and len(owned) == 2
                        and len(revisions) == 1)
            wait_for(written, 60, 0.2, what=f"the set's pods, claims, revision and status\n{controllers.log_tail()}")
        account = "system:serviceaccount:kube-system:statefulset-controller"
        keys = (("pods", None, "create"), ("controllerrevisions", None, "create"),
                ("persistentvolumeclaims", None, "create"), ("persistentvolumeclaims", None, "update"),
                ("statefulsets", "status", "update"), ("events", None, "create"))

        def writers() -> dict[tuple[str, str | None, str], str]:
            return {(e["objectRef"]["resource"], e["objectRef"].get("subresource"), e["verb"]): e["user"]["username"]
                    for e in filter_events(secure.audit_events(), namespace="default")
                    if (e["verb"] in ("create", "update") and e["objectRef"]["resource"] != "statefulsets")
                    or e["objectRef"].get("subresource") == "status"}

        # the audit backend writes in batches after the response: wait for the entries, do not read at once
        wait_for(lambda: all(key in writers() for key in keys), 10, 0.1, what="the controller's writes audited")
        found = writers()
        for key in keys:
            assert found.get(key) == account, (key, found)
        denied = [e for e in secure.audit_events() if e["user"]["username"] == account
                  and (e.get("responseStatus") or {}).get("code") == 403]
        assert denied == [], denied
    finally:
        controllers.stop()
        secure.stop()
        etcd.stop()
        shutil.rmtree(folder, ignore_errors=True)
