"""mkubectl's pure parts: manifests and their errors, error wording, rollout status lines, resource
names, durations, exec exit codes, describe helpers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubectl.cli import build_parser
from kubectl.commands.exec_ import exit_code_of
from kubectl.describe import (
    configmap_description,
    describe_probe,
    label_selector_string,
    quantity,
    secret_description,
    smart_label,
)
from kubectl.errors import CommandError, format_error, status_message, with_source
from kubectl.flags import duration
from kubectl.manifests import load, parse_documents
from kubectl.resources import Resolver, multiple_types_requested, targets_from_args
from kubectl.rollout import deployment_status
from machinery.api.meta import Status, StatusCause, StatusDetails
from machinery.client import ApiError, ApiUnavailable

# -- manifests -----------------------------------------------------------------------------------


def parse_error(text: str, source: str = "f.yaml") -> str:
    with pytest.raises(CommandError) as err:
        parse_documents(text, source)
    return str(err.value)


@pytest.mark.parametrize("text, message", [
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: a\n    image: b\n"
     "     foo: bar\n", "yaml: line 9: mapping values are not allowed in this context"),
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: {a: b\nspec: {}\n",
     "yaml: line 5: did not find expected ',' or '}'"),
    ("apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n", "yaml: line 4: found character that cannot start any token"),
    ('a: "unterminated\nb: c\n', "yaml: line 3: found unexpected end of stream"),
])


def test_yaml_errors_read_like_kubectls(text: str, message: str) -> None:
    """The expected lines are kubectl 1.33's for the same files."""
    assert parse_error(text) == f"error parsing f.yaml: error converting YAML to JSON: {message}"


def test_validation_errors() -> None:
    suffix = "; if you choose to ignore these errors, turn validation off with --validate=false"
    assert parse_error("metadata:\n  name: x\n") == (
        f'error validating "f.yaml": error validating data: [apiVersion not set, kind not set]{suffix}')
    assert parse_error("apiVersion: v1\nmetadata: {}\n") == (
        f'error validating "f.yaml": error validating data: kind not set{suffix}')
    assert parse_error("- a\n- b\n") == (
        f'error validating "f.yaml": error validating data: invalid object to validate{suffix}')


def test_documents_lists_and_timestamps() -> None:
    docs = parse_documents(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, annotations: {t: 2026-01-01T00:00:00Z}}\n---\n"
        "# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n"
        "- {apiVersion: apps/v1, kind: Deployment, metadata: {name: c}}\n", "STDIN")
    assert [d.obj["metadata"]["name"] for d in docs] == ["a", "b", "c"]
    assert docs[0].obj["metadata"]["annotations"]["t"] == "2026-01-01T00:00:00Z"  # a string, as in JSON
    assert {d.source for d in docs} == {"STDIN"}


def test_directories_take_yaml_and_json_files_in_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n")
    (tmp_path / "a.json").write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}')
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: c}\n")
    assert [m.obj["metadata"]["name"] for m in load([str(tmp_path)])] == ["a", "b"]
    assert [m.obj["metadata"]["name"] for m in load([str(tmp_path)], recursive=True)] == ["a", "b", "c"]
    with pytest.raises(CommandError, match=r'the path "nope\.yaml" does not exist'):
        load(["nope.yaml"])


# -- errors --------------------------------------------------------------------------------------


def api_error(code: int, reason: str, message: str, details: StatusDetails | None = None) -> ApiError:
    return ApiError(Status(status="Failure", code=code, reason=reason, message=message, details=details), code)


def test_status_messages() -> None:
    assert format_error(api_error(404, "NotFound", 'deployments.apps "x" not found')) == (
        'Error from server (NotFound): deployments.apps "x" not found')
    conflict = ('Operation cannot be fulfilled on deployments.apps "x": the object has been modified; please apply '
                "your changes to the latest version and try again")
    assert format_error(api_error(409, "Conflict", conflict)) == f"Error from server (Conflict): {conflict}"
    invalid = StatusDetails(kind="Deployment", name="x", causes=[
        StatusCause(field="spec.replicas", message="Invalid value: -1: must be greater than or equal to 0")])
    assert format_error(api_error(422, "Invalid", "ignored", invalid)) == (
        'The Deployment "x" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')
    two = StatusDetails(kind="Pod", name="p", causes=[StatusCause(field="a", message="m1"),
                                                      StatusCause(field="b", message="m2")])
    assert status_message(api_error(422, "Invalid", "", two).status, 422) == (
        'The Pod "p" is invalid: \n* a: m1\n* b: m2')
    assert format_error(api_error(401, "Unauthorized", "Unauthorized")) == (
        "error: You must be logged in to the server (Unauthorized)")
    sourced = with_source(api_error(403, "Forbidden", "no"), "creating", "d.yaml")
    assert format_error(sourced) == 'Error from server (Forbidden): error when creating "d.yaml": no'
    assert format_error(CommandError("boom")) == "error: boom"


def test_connection_refused_names_the_server() -> None:
    async def refused() -> BaseException:
        try:
            async with aiohttp.ClientSession() as session, session.get("http://127.0.0.1:1/api"):
                pass
        except aiohttp.ClientError as e:
            try:
                raise ApiUnavailable("GET /api") from e
            except ApiUnavailable as wrapped:
                return wrapped
        raise AssertionError("port 1 answered")

    err = asyncio.run(refused())
    assert format_error(err, "http://127.0.0.1:1") == (
        "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?")


# -- rollout status ------------------------------------------------------------------------------


def deployment(desired: int, generation: int = 2, observed: int = 2, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "generation": generation}, "spec": {"replicas": desired},
            "status": {"observedGeneration": observed, **status}}


def test_rollout_status_lines_are_kubectls() -> None:
    assert deployment_status(deployment(3, 3, 2)) == ("Waiting for deployment spec update to be observed...", False)
    assert deployment_status(deployment(3, updatedReplicas=1, replicas=3)) == (
        'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...', False)
    assert deployment_status(deployment(3, updatedReplicas=3, replicas=4)) == (
        'Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...', False)
    assert deployment_status(deployment(3, updatedReplicas=3, replicas=3, availableReplicas=1)) == (
        'Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available...', False)
    assert deployment_status(deployment(3, updatedReplicas=3, replicas=3, availableReplicas=3)) == (
        'deployment "web" successfully rolled out', True)
    stuck = deployment(3, conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}])
    with pytest.raises(CommandError, match='deployment "web" exceeded its progress deadline'):
        deployment_status(stuck)
    revised = deployment(1, updatedReplicas=1, replicas=1, availableReplicas=1)
    revised["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "2"}
    with pytest.raises(CommandError, match=r"desired revision \(3\) is different from the running revision \(2\)"):
        deployment_status(revised, 3)


# -- resource names, flags -----------------------------------------------------------------------


def test_resource_names_resolve_like_kubectls() -> None:
    async def resolve() -> list[str]:
        resolver = Resolver(None)  # type: ignore[arg-type] — known names never reach the server
        names = ["po", "pods", "Pod", "deploy", "deployments.apps", "deployments.v1.apps", "rs", "no", "ns", "ev"]
        found = [(await resolver.resolve(n)).plural for n in names]
        targets = await targets_from_args(resolver, ["deploy/a", "deploy/b", "po/c"])
        found.append(";".join(f"{t.info.plural}={','.join(t.names)}" for t in targets))
        found.append(",".join(i.plural for i in await resolver.expand("all")))
        return found

    assert asyncio.run(resolve()) == ["pods", "pods", "pods", "deployments", "deployments", "deployments",
                                      "replicasets", "nodes", "namespaces", "events",
                                      "deployments=a,b;pods=c",
                                      "pods,services,replicationcontrollers,deployments,replicasets,daemonsets,"
                                      "statefulsets,jobs,cronjobs,horizontalpodautoscalers"]
    assert multiple_types_requested(["all"]) and multiple_types_requested(["deploy,po"])
    assert multiple_types_requested(["deploy/a", "po/b"]) and not multiple_types_requested(["po", "a", "b"])


def test_mixed_name_forms_are_refused() -> None:
    with pytest.raises(CommandError, match="no need to specify a resource type as a separate argument"):
        asyncio.run(targets_from_args(Resolver(None), ["deploy", "deploy/a"]))  # type: ignore[arg-type]


def test_durations_and_global_flags_anywhere() -> None:
    assert duration("30s") == 30 and duration("1m30s") == 90 and duration("2") == 2 and duration("100ms") == 0.1
    parser = build_parser()
    args = parser.parse_args(["-n", "a", "get", "po"])
    assert args.namespace == "a" and args.resources == ["po"]
    args = parser.parse_args(["get", "po", "-n", "b", "--kubeconfig", "k"])
    assert args.namespace == "b" and args.kubeconfig == "k"


def test_exec_exit_codes() -> None:
    assert exit_code_of({"metadata": {}, "status": "Success"}) == 0
    assert exit_code_of({"status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated",
                         "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}) == 3
    with pytest.raises(ApiError) as err:
        exit_code_of({"status": "Failure", "reason": "InternalError", "message": "boom", "code": 500})
    assert format_error(err.value) == "Error from server (InternalError): boom"


# -- describe helpers ----------------------------------------------------------------------------


def test_describe_helpers() -> None:
    assert label_selector_string({"matchLabels": {"b": "2", "a": "1"},
                                  "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]},
                                                       {"key": "d", "operator": "DoesNotExist"}]}) == (
        "a=1,b=2,c in (x,y),!d")
    assert smart_label("creationTimestamp") == "Creation Timestamp"
    assert smart_label("apiVersion") == "API Version"
    assert smart_label("holderIdentity") == "Holder Identity"
    assert describe_probe({"httpGet": {"path": "/healthz", "port": 8080}, "timeoutSeconds": 1, "periodSeconds": 10,
                           "successThreshold": 1, "failureThreshold": 3}) == (
        "http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3")
    assert describe_probe({"exec": {"command": ["cat", "/tmp/x"]}}).startswith("exec [cat /tmp/x] delay=0s")
    assert str(quantity("500m") + quantity("500m")) == "1"
    assert str(quantity("250m")) == "250m"
    assert str(quantity("64Mi") + quantity("64Mi")) == "128Mi"
    assert str(quantity("100M") + quantity("100M")) == "200M"  # as written, as upstream's Add keeps it
    assert quantity("bogus").is_zero() and quantity(None).is_zero()


def test_describe_secret_shows_sizes_not_values() -> None:
    """upstream describeSecret; a service-account token's `token` is the one value it prints."""
    secret = {"metadata": {"name": "db", "namespace": "default"}, "type": "Opaque",
              "data": {"user": "YWRtaW4=", "password": "aHVudGVyMg=="}}
    text = secret_description(secret)
    assert text.splitlines()[-6:] == ["Type:  Opaque", "", "Data", "====", "password:  7 bytes",
                                      "user:      5 bytes"]
    assert "Type:  Opaque" in text and "password:  7 bytes" in text and "user:      5 bytes" in text
    assert "hunter2" not in text and "aHVudGVyMg==" not in text and "admin" not in text
    token = {"metadata": {"name": "t", "namespace": "default"}, "type": "kubernetes.io/service-account-token",
             "data": {"token": "ZXlKaGJH", "ca.crt": "eA=="}}
    assert "token:   eyJhbG" in secret_description(token) and "ca.crt:  1 bytes" in secret_description(token)


def test_describe_configmap() -> None:
    cm = {"metadata": {"name": "app", "namespace": "default"}, "data": {"mode": "dark"},
          "binaryData": {"blob": "AAEC"}}
    text = configmap_description(cm, None)
    assert "Data\n====\nmode:\n----\ndark\n" in text
    assert "BinaryData\n====\nblob: 3 bytes\n" in text
