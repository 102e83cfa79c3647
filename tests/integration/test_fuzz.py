"""Schema-driven fuzzing of the apiserver: schemathesis generates requests for every operation of its own
OpenAPI v3 documents, hypothesis throws random JSON at the create endpoints. No answer may be a 5xx, and
every 4xx body must be a Status.

The run is bounded and repeatable (derandomized, 1-3 examples per operation, no example database) and
aims at an apiserver and etcd of its own, so the random objects it creates (nodes, cluster roles,
namespaces) never meet the other tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from tests.cluster import ApiServer, Etcd, make_workdir
from tests.manifests import deployment, pod

NAMESPACE = "fuzz"
# writes decode and validate bodies, where the bugs live; reads and deletes take only query parameters
EXAMPLES_PER_WRITE, EXAMPLES_PER_READ = 3, 1
# what needs a kubelet or streams for as long as it is told: no answer to judge within a bounded run
SKIPPED_SUBRESOURCES = ("/exec", "/attach", "/portforward", "/proxy", "/log")


def bounded(examples: int) -> settings:
    """A fixed number of examples, the same ones every run, nothing remembered between runs."""
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def fuzz_apiserver() -> Iterator[ApiServer]:
    workdir = make_workdir("minik8s-fuzz-")
    etcd = Etcd(workdir)
    etcd.start()
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as api:
            r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": NAMESPACE}})
            assert r.status_code == 201, r.text
        yield server
    finally:
        server.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def assert_answer(method: str, path: str, code: int, content_type: str, body: bytes) -> None:
    """No server error; a refusal is a Failure Status with the code it was sent with."""
    assert code < 500, f"{method} {path} -> {code}: {body[:500]!r}"
    if 400 <= code < 500:
        assert content_type.startswith("application/json"), f"{method} {path} -> {code} {content_type}: {body[:300]!r}"
        status = json.loads(body)
        assert status.get("kind") == "Status" and status.get("apiVersion") == "v1", (method, path, status)
        assert status.get("status") == "Failure" and status.get("code") == code, (method, path, status)
        assert status.get("reason") and status.get("message"), (method, path, status)


def _operations(url: str) -> list[Any]:
    """Every operation of every group-version document /openapi/v3 lists."""
    roots = httpx.get(f"{url}/openapi/v3", timeout=30).json()["paths"]
    operations = []
    for gv_path in sorted(roots):
        if gv_path in ("api", "apis"):  # discovery documents: nothing to fuzz
            continue
        schema = schemathesis.openapi.from_url(f"{url}/openapi/v3/{gv_path}")
        for result in schema.get_all_operations():
            operation = result.ok()
            if not operation.path.endswith(SKIPPED_SUBRESOURCES):
                operations.append(operation)
    return operations


def test_schema_driven_fuzz_finds_no_server_error(fuzz_apiserver: ApiServer) -> None:
    url = fuzz_apiserver.url
    operations = _operations(url)
    assert len(operations) > 30, [op.label for op in operations]  # the documents really list the API
    seen: dict[int, int] = {}
    for operation in operations:
        strategy = operation.as_strategy(path_parameters={"namespace": NAMESPACE})

        @bounded(EXAMPLES_PER_WRITE if operation.method.upper() in ("POST", "PUT", "PATCH") else EXAMPLES_PER_READ)
        @given(case=strategy)
        def run(case: Any) -> None:
            if case.query:  # a watch or a followed log would hold the connection open: list and read instead
                for streaming in ("watch", "follow"):
                    case.query.pop(streaming, None)
            response = case.call(base_url=url, timeout=30)
            seen[response.status_code] = seen.get(response.status_code, 0) + 1
            case.validate_response(response, checks=[not_a_server_error])
            assert_answer(case.method, case.formatted_path, response.status_code,
                          response.headers.get("content-type", [""])[0], response.content)

        run()
    assert any(400 <= code < 500 for code in seen) and any(code < 300 for code in seen), seen


# -- a second layer: random JSON where an object is expected -----------------------------------------

# edge values Go's decoder refuses or Python's would mishandle, besides arbitrary JSON
_edges = st.sampled_from([2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 1e308, -1, "", "../x", [], {}, None])
_json = _edges | st.recursive(st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
                              | st.floats(allow_nan=False) | st.text(max_size=20),
                              lambda inner: st.lists(inner, max_size=4)
                              | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                              max_leaves=20)
# where a value goes: fields the schema knows (so it is not merely pruned as unknown), or anywhere
_known = st.sampled_from([
    ["metadata"], ["metadata", "name"], ["metadata", "labels"], ["metadata", "generation"], ["spec"],
    ["spec", "replicas"], ["spec", "terminationGracePeriodSeconds"], ["spec", "containers"],
    ["spec", "selector"], ["spec", "template"], ["spec", "template", "spec", "containers"], ["status"],
])
_paths = _known | st.lists(st.sampled_from(["metadata", "spec", "status", "name", "labels", "containers", "0",
                                            "replicas", "selector", "template", "resources", "limits", "ports"]),
                           min_size=1, max_size=5)


def _graft(base: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """base with value put at path, replacing whatever stood in the way."""
    out = json.loads(json.dumps(base))
    node = out
    for part in path[:-1]:
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(("collection", "base"), [
    (f"/api/v1/namespaces/{NAMESPACE}/pods", pod("random")),
    (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deployment("random")),
], ids=["pods", "deployments"])
def test_random_json_in_valid_objects_finds_no_server_error(fuzz_apiserver: ApiServer, collection: str,
                                                            base: dict[str, Any]) -> None:
    with httpx.Client(base_url=fuzz_apiserver.url, timeout=30) as api:

        @bounded(40)
        @given(path=_paths, value=_json, strict=st.booleans())
        def run(path: list[str], value: Any, strict: bool) -> None:
            body = json.dumps(_graft(base, path, value)).encode()
            params = {"dryRun": "All", "fieldValidation": "Strict" if strict else "Warn"}
            r = api.post(collection, content=body, params=params, headers={"content-type": "application/json"})
            assert_answer("POST", collection, r.status_code, r.headers.get("content-type", ""), r.content)
            r = api.patch(f"{collection}/random", content=json.dumps(_graft({}, path, value)).encode(),
                          params={"dryRun": "All"}, headers={"content-type": "application/merge-patch+json"})
            assert_answer("PATCH", collection, r.status_code, r.headers.get("content-type", ""), r.content)

        run()
