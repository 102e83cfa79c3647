"""CustomResourceDefinitions through real kubectl 1.27 and 1.33 (and the official Python client's
CustomObjectsApi): `kubectl apply` of a CRD then of a custom object, `get` by plural and shortName with
the additionalPrinterColumns, `explain` from the OpenAPI built of the schema, patches (merge and JSON;
strategic merge refused), `edit`, `scale` on the scale subresource, schema and CEL errors as kubectl
prints them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import ApiServer, wait_for
from tests.integration.test_crd import delete_crd, established, widget_crd
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir

pytestmark = pytest.mark.kubectl

VERSIONS = ("1.27", "1.33")


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    version: str = request.param
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed (looked next to `kubectl` in {kubectl_dir()} and on PATH)")
    apiserver: ApiServer = request.getfixturevalue("apiserver")
    namespace: str = request.getfixturevalue("namespace")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


@pytest.fixture
def group() -> str:
    return f"k{uuid.uuid4().hex[:8]}.example.com"


@pytest.fixture
def crd_applied(kubectl: Kubectl, api: httpx.Client, group: str, tmp_path: Path) -> Iterator[str]:
    """The Widget CRD applied with kubectl and Established; its name."""
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(widget_crd(group)))
    out = kubectl.run("apply", "-f", str(path)).ok().stdout
    name = f"widgets.{group}"
    assert f"customresourcedefinition.apiextensions.k8s.io/{name} created" in out
    wait_for(lambda: established(api, name), 20, what="Established")
    # Established is written once; a client that acts at once may still meet the path before it is served
    wait_for(lambda: api.get(f"/apis/{group}/v1/widgets").status_code == 200, 20, what="the widgets served")
    yield name
    delete_crd(api, name)


def write(tmp_path: Path, obj: dict[str, Any], name: str = "cr.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def test_apply_get_and_columns(kubectl: Kubectl, crd_applied: str, group: str, tmp_path: Path) -> None:
    cr = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "alpha"},
          "spec": {"size": 3, "color": "blue"}}
    out = kubectl.run("apply", "-f", write(tmp_path, cr)).ok().stdout
    assert f"widget.{group}/alpha created" in out
    lines = kubectl.run("get", "widgets").ok().stdout.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "COLOR", "AGE"]
    assert lines[1].split()[:3] == ["alpha", "3", "blue"]
    wide = kubectl.run("get", "wd", "-o", "wide").ok().stdout.splitlines()  # the shortName
    assert wide[0].split() == ["NAME", "SIZE", "COLOR", "PHASE", "AGE"]
    assert wide[1].split()[:3] == ["alpha", "3", "blue"]  # no phase yet: an empty (null) cell
    assert "alpha" in kubectl.run("get", f"widgets.{group}", "alpha", "-o", "name").ok().stdout
    assert "widget" in kubectl.run("get", "all").ok().stdout  # categories: all
    # applying again with a change: a JSON merge patch (kubectl falls back from strategic merge for CRs)
    cr["spec"]["size"] = 5
    out = kubectl.run("apply", "-f", write(tmp_path, cr)).ok().stdout
    assert f"widget.{group}/alpha configured" in out
    got = json.loads(kubectl.run("get", "widget", "alpha", "-o", "json").ok().stdout)
    assert got["spec"] == {"size": 5, "color": "blue", "maxSize": 10}
    crds = kubectl.run("get", "crd", crd_applied).ok().stdout.splitlines()
    assert crds[0].split() == ["NAME", "CREATED", "AT"]


def test_explain_reads_the_schema(kubectl: Kubectl, crd_applied: str) -> None:
    def explained() -> str:
        r = kubectl.run("explain", "widgets.spec")
        return r.stdout if r.returncode == 0 else ""

    out = wait_for(explained, 20, what="kubectl explain widgets.spec")
    assert isinstance(out, str)
    assert "KIND:" in out and "Widget" in out
    for field_name in ("size", "maxSize", "color"):
        assert field_name in out


def test_patches_edit_and_scale(kubectl: Kubectl, crd_applied: str, group: str, tmp_path: Path) -> None:
    cr = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "beta"},
          "spec": {"size": 1, "replicas": 1}}
    kubectl.run("apply", "-f", write(tmp_path, cr)).ok()
    kubectl.run("patch", "widget", "beta", "--type", "merge", "-p", '{"spec":{"size":2}}').ok()
    kubectl.run("patch", "widget", "beta", "--type", "json",
                "-p", '[{"op":"replace","path":"/spec/size","value":4}]').ok()
    r = kubectl.run("patch", "widget", "beta", "-p", '{"spec":{"size":6}}')  # strategic merge, the default
    assert r.returncode != 0
    assert "strategic merge patch" in r.stderr or "UnsupportedMediaType" in r.stderr or "415" in r.stderr \
        or "unknown format" in r.stderr, r.stderr
    kubectl.run("scale", "widget", "beta", "--replicas", "3").ok()
    got = json.loads(kubectl.run("get", "widget", "beta", "-o", "json").ok().stdout)
    assert got["spec"]["size"] == 4 and got["spec"]["replicas"] == 3
    # edit: an editor that rewrites the size
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/size: 4/size: 7/' \"$1\"\n")
    editor.chmod(0o755)
    kubectl.env["KUBE_EDITOR"] = str(editor)
    kubectl.run("edit", "widget", "beta").ok()
    got = json.loads(kubectl.run("get", "widget", "beta", "-o", "json").ok().stdout)
    assert got["spec"]["size"] == 7


def test_invalid_objects_as_kubectl_prints_them(kubectl: Kubectl, crd_applied: str, group: str,
                                                tmp_path: Path) -> None:
    cr = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "gamma"},
          "spec": {"size": 0}}
    r = kubectl.run("apply", "--validate=false", "-f", write(tmp_path, cr))
    assert r.returncode != 0
    assert ('The Widget "gamma" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater '
            'than or equal to 1') in r.stderr, r.stderr
    cr["spec"] = {"size": 20}
    r = kubectl.run("apply", "--validate=false", "-f", write(tmp_path, cr))
    assert r.returncode != 0
    assert 'spec: Invalid value: "object": size may not exceed maxSize' in r.stderr, r.stderr


def test_python_client_custom_objects_api(apiserver: ApiServer, api: httpx.Client, group: str,
                                          namespace: str) -> None:
    from kubernetes import client, watch

    crd = widget_crd(group)
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd).status_code == 201
    name = crd["metadata"]["name"]
    try:
        wait_for(lambda: established(api, name), 20, what="Established")
        wait_for(lambda: api.get(f"/apis/{group}/v1/widgets").status_code == 200, 20, what="served")
        configuration = client.Configuration()
        configuration.host = apiserver.url
        with client.ApiClient(configuration) as api_client:
            objects = client.CustomObjectsApi(api_client)
            created = objects.create_namespaced_custom_object(group, "v1", namespace, "widgets", {
                "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "py"}, "spec": {"size": 2}})
            assert created["spec"]["maxSize"] == 10
            listed = objects.list_namespaced_custom_object(group, "v1", namespace, "widgets")
            assert [i["metadata"]["name"] for i in listed["items"]] == ["py"]
            patched = objects.patch_namespaced_custom_object(group, "v1", namespace, "widgets", "py",
                                                             {"spec": {"size": 3}})
            assert patched["spec"]["size"] == 3
            status = objects.patch_namespaced_custom_object_status(group, "v1", namespace, "widgets", "py",
                                                                   {"status": {"phase": "Ready"}})
            assert status["status"] == {"phase": "Ready"}
            events = []
            stream = watch.Watch().stream(objects.list_namespaced_custom_object, group, "v1", namespace, "widgets",
                                          resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=10)
            objects.delete_namespaced_custom_object(group, "v1", namespace, "widgets", "py")
            for event in stream:
                events.append((event["type"], event["object"]["metadata"]["name"]))
                if event["type"] == "DELETED":
                    break
            assert ("DELETED", "py") in events
    finally:
        delete_crd(api, name)



def test_server_side_apply_describe_and_delete(kubectl: Kubectl, crd_applied: str, group: str,
                                               tmp_path: Path) -> None:
    cr = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "delta"},
          "spec": {"size": 2, "color": "green"}}
    out = kubectl.run("apply", "--server-side", "-f", write(tmp_path, cr)).ok().stdout
    assert f"widget.{group}/delta serverside-applied" in out
    cr["spec"]["size"] = 3
    kubectl.run("apply", "--server-side", "-f", write(tmp_path, cr)).ok()
    got = json.loads(kubectl.run("get", "widget", "delta", "-o", "json").ok().stdout)
    assert got["spec"] == {"size": 3, "color": "green", "maxSize": 10}
    described = kubectl.run("describe", "widget", "delta").ok().stdout
    assert "Name:" in described and "delta" in described and "Size:" in described
    out = kubectl.run("delete", "widget", "delta").ok().stdout
    assert f'widget.{group} "delta" deleted' in out


def test_get_watch_prints_rows(kubectl: Kubectl, crd_applied: str, api: httpx.Client, group: str,
                               namespace: str) -> None:
    with kubectl.watch("get", "widgets", "-w") as watch:
        body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "watched"},
                "spec": {"size": 4, "color": "red"}}
        assert api.post(f"/apis/{group}/v1/namespaces/{namespace}/widgets", json=body).status_code == 201
        line = watch.wait_for_line(lambda line: line.startswith("watched"), 20, what="the new row")
        assert line.split()[:3] == ["watched", "4", "red"]


def test_discovery_is_one_aggregated_request(kubectl: Kubectl, crd_applied: str, group: str) -> None:
    """A fresh discovery cache: kubectl reads /api and /apis (aggregated) and no group-version document."""
    result = kubectl.run("get", "widgets", "-v=6").ok()
    assert "/apis?timeout=32s" in result.stderr
    assert f"/apis/{group}/v1?timeout" not in result.stderr
    assert "/apis/apps/v1?timeout" not in result.stderr


def test_new_crd_found_with_a_warm_discovery_cache(kubectl: Kubectl, api: httpx.Client, group: str) -> None:
    """kubectl that cached discovery before the CRD existed finds the new resource at once (an unknown
    resource makes it read discovery again)."""
    kubectl.run("get", "pods").ok()  # discovery cached now
    crd = widget_crd(group, plural="sprockets", kind="Sprocket", short_names=["spr"])
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd).status_code == 201
    try:
        wait_for(lambda: api.get(f"/apis/{group}/v1/sprockets").status_code == 200, 20, what="served")
        result = kubectl.run("get", "sprockets")
        assert result.returncode == 0, result
        assert "No resources found" in result.stderr
        assert kubectl.run("get", "spr").returncode == 0
    finally:
        delete_crd(api, f"sprockets.{group}")
