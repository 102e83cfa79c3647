"""Custom resources through the gate of a secure apiserver, unchanged: a validating admission webhook
whose rule names the custom resource refuses one of its objects, and the audit log records the
requests on it with their group, version and resource."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from apiserver.audit import read_events
from tests.auth_cluster import SecureApiServer
from tests.cluster import wait_for
from tests.integration.test_admission import (  # noqa: F401 (fixtures)
    DENY,
    ca_bundle,
    configuration,
    hook,
    ns,
    secure,
    webhook,
)
from tests.integration.test_crd import established, widget, widget_crd


def test_webhooks_and_audit_see_custom_objects(secure: SecureApiServer, admin: httpx.Client,  # noqa: F811
                                               webhook: str, ns: str) -> None:  # noqa: F811
    group = f"adm{uuid.uuid4().hex[:8]}.example.com"
    crd = widget_crd(group)
    assert admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd).status_code == 201
    name = crd["metadata"]["name"]
    wait_for(lambda: established(admin, name), 20, what="Established")
    base = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    wait_for(lambda: admin.get(base).status_code == 200, 20, what="served")
    rule: dict[str, Any] = {"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["v1"],
                            "resources": ["widgets"]}
    validate = hook("deny.sidecar.minik8s.io", f"{webhook}/validate", ns, ca_bundle(secure), rules=[rule])
    with configuration(admin, "Validating", validate):
        denied = widget("refused")
        denied["metadata"]["labels"] = DENY
        r = admin.post(base, json=denied)
        assert r.status_code == 403, r.text
        assert r.json()["message"].startswith('admission webhook "deny.sidecar.minik8s.io" denied the request')
        assert admin.get(f"{base}/refused").status_code == 404
        assert admin.post(base, json=widget("allowed")).status_code == 201

    def audited() -> list[dict[str, Any]]:
        found = [e for e in read_events(secure.audit_log)
                 if (e.get("objectRef") or {}).get("apiGroup") == group and e.get("stage") == "ResponseComplete"]
        return found if len([e for e in found if e["verb"] == "create"]) >= 2 else []

    events = wait_for(audited, 20, what="audit events on widgets")
    assert isinstance(events, list)
    creates = [e for e in events if e["verb"] == "create"]
    assert {e["objectRef"]["resource"] for e in creates} == {"widgets"}
    assert {e["objectRef"]["apiVersion"] for e in creates} == {"v1"}
    assert sorted(e["responseStatus"]["code"] for e in creates) == [201, 403]
    admin.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
