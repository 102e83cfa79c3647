"""The garbage collector (a real controller-manager process) on custom resources: it discovers a CRD
created after it started, collects a custom object whose owner (a ConfigMap) is deleted, and a
ConfigMap owned by a deleted custom object."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_crd import create_crd, delete_crd, widget, widget_crd


@pytest.fixture(scope="module")
def gc(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, apiserver.url, ["garbagecollector"])
    try:
        process.start()
        yield process
    finally:
        process.stop()


def ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"]}


def test_custom_objects_owned_and_owning(gc: ControllerProcess, api: httpx.Client, namespace: str) -> None:
    group = f"gc{uuid.uuid4().hex[:8]}.example.com"
    create_crd(api, widget_crd(group))  # after the controller-manager started: found by its discovery
    try:
        widgets = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
        configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        owner = api.post(configmaps, json={"metadata": {"name": "owner"}, "data": {}}).json()
        body = widget("owned")
        body["metadata"]["ownerReferences"] = [ref(owner)]
        assert api.post(widgets, json=body).status_code == 201
        owning = api.post(widgets, json=widget("owning")).json()
        r = api.post(configmaps, json={"metadata": {"name": "dependent", "ownerReferences": [ref(owning)]}})
        assert r.status_code == 201, r.text
        # the GC must watch widgets before a delete means anything to it: wait until a custom owner's
        # deletion is acted on (ConfigMap dependent) — that needs the new resource monitored
        assert api.delete(f"{widgets}/owning").status_code == 200
        wait_for(lambda: api.get(f"{configmaps}/dependent").status_code == 404, 40,
                 what="the ConfigMap owned by a deleted custom object collected")
        assert api.delete(f"{configmaps}/owner").status_code == 200
        wait_for(lambda: api.get(f"{widgets}/owned").status_code == 404, 40,
                 what="the custom object owned by a deleted ConfigMap collected")
    finally:
        delete_crd(api, f"widgets.{group}")
