"""ConfigMaps and Secrets on a real apiserver and etcd, with encryption at rest on (aescbc, key1):
real kubectl 1.27 and 1.33 (`create configmap|secret ...`, `get cm,secrets`, `describe secret`), the
official Python client, errors that store nothing, and etcd's own bytes: no plaintext, upstream's
`k8s:enc:aescbc:v1:key1:` prefix, and a key rotation across apiserver restarts.

One etcd and one apiserver for the module (restarted with a new encryption config by the rotation test,
which runs last)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import ApiServer, Etcd, make_workdir
from tests.conftest import etcd_keys
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir

VERSIONS = ("1.27", "1.33")
PASSWORD = "hunter2-" + uuid.uuid4().hex  # unique: found nowhere in etcd unless leaked
KEY1, KEY2 = base64.b64encode(os.urandom(32)).decode(), base64.b64encode(os.urandom(32)).decode()


def encryption_config(path: Path, *keys: tuple[str, str]) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
        "resources": [{"resources": ["secrets"], "providers": [
            {"aescbc": {"keys": [{"name": name, "secret": secret} for name, secret in keys]}}, {"identity": {}}]}],
    }))
    path.chmod(0o600)
    return path


class Cluster:
    def __init__(self, workdir: Path, etcd: Etcd, server: ApiServer, config: Path):
        self.workdir, self.etcd, self.server, self.config = workdir, etcd, server, config


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    workdir = make_workdir("minik8s-cfgapi-")
    etcd = Etcd(workdir)
    etcd.start()
    config = encryption_config(workdir / "encryption-config.yaml", ("key1", KEY1))
    server = ApiServer(workdir, etcd, "--encryption-provider-config", str(config), "--etcd-compaction-interval", "0")
    try:
        server.start()
        yield Cluster(workdir, etcd, server, config)
    finally:
        server.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.server.url, timeout=10) as client:
        yield client


@pytest.fixture
def namespace(api: httpx.Client) -> Iterator[str]:
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    r = api.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    api.delete(f"/api/v1/namespaces/{name}")


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def raw(cluster: Cluster, key: str) -> bytes:
    return etcd_keys(cluster.etcd, key)[key]


def secrets(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/secrets"


def configmaps(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def stored_names(cluster: Cluster, resource: str, ns: str) -> set[str]:
    return {k.rsplit("/", 1)[1] for k in etcd_keys(cluster.etcd, f"/registry/{resource}/{ns}/")}


# -- kubectl -------------------------------------------------------------------------------------


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path, cluster: Cluster, namespace: str) -> Kubectl:
    binary = find_kubectl(request.param)
    if binary is None:
        pytest.skip(f"kubectl.{request.param} is not installed (looked in {kubectl_dir()})")
    return Kubectl(binary, request.param, cluster.server.url, tmp_path / "kubectl", namespace)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from apiserver.auth.pki import CA, cert_pem, key_pem

    ca = CA.create("tls-test")
    crt_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    crt_path.write_bytes(cert_pem(ca.cert))
    key_path.write_bytes(key_pem(ca.key))
    return crt_path, key_path


def test_kubectl_create_get_describe(kubectl: Kubectl, cluster: Cluster, api: httpx.Client, namespace: str,
                                     tmp_path: Path) -> None:
    conf = tmp_path / "app.properties"
    conf.write_text("color=blue\nsize=10\n")
    kubectl.run("create", "configmap", "app", "--from-literal=mode=dark", f"--from-file={conf}").ok()
    kubectl.run("create", "secret", "generic", "db", f"--from-literal=password={PASSWORD}",
                "--from-literal=user=admin").ok()
    crt, key = _self_signed(tmp_path)
    kubectl.run("create", "secret", "tls", "web-tls", f"--cert={crt}", f"--key={key}").ok()
    kubectl.run("create", "secret", "docker-registry", "regcred", "--docker-server=registry.example",
                "--docker-username=u", f"--docker-password={PASSWORD}").ok()

    cm = api.get(f"{configmaps(namespace)}/app").json()
    assert cm["data"] == {"mode": "dark", "app.properties": "color=blue\nsize=10\n"}
    db = api.get(f"{secrets(namespace)}/db").json()
    assert db["type"] == "Opaque" and base64.b64decode(db["data"]["password"]).decode() == PASSWORD
    docker = api.get(f"{secrets(namespace)}/regcred").json()
    assert docker["type"] == "kubernetes.io/dockerconfigjson"
    assert "registry.example" in json.loads(base64.b64decode(docker["data"][".dockerconfigjson"]))["auths"]

    out = kubectl.run("get", "cm,secrets").ok().stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert ["NAME", "DATA", "AGE"] in lines and ["NAME", "TYPE", "DATA", "AGE"] in lines
    rows = {line[0]: line[1:-1] for line in lines if "/" in line[0]}
    assert rows["configmap/app"] == ["2"]
    assert rows["secret/db"] == ["Opaque", "2"]
    assert rows["secret/web-tls"] == ["kubernetes.io/tls", "2"]
    assert rows["secret/regcred"] == ["kubernetes.io/dockerconfigjson", "1"]

    described = kubectl.run("describe", "secret", "db").ok().stdout
    assert f"password:  {len(PASSWORD)} bytes" in described and "user:      5 bytes" in described
    assert PASSWORD not in described
    assert "color=blue" in kubectl.run("describe", "configmap", "app").ok().stdout

    # etcd holds the secrets encrypted and the configmap (not in the config) as it is
    for name in ("db", "web-tls", "regcred"):
        stored = raw(cluster, f"/registry/secrets/{namespace}/{name}")
        assert stored.startswith(b"k8s:enc:aescbc:v1:key1:"), stored[:40]
        assert PASSWORD.encode() not in stored and b64(PASSWORD).encode() not in stored and b'"kind"' not in stored
    assert b'"mode":"dark"' in raw(cluster, f"/registry/configmaps/{namespace}/app")

    kubectl.run("delete", "secret", "db", "regcred").ok()
    assert stored_names(cluster, "secrets", namespace) == {"web-tls"}


def test_kubectl_errors(kubectl: Kubectl, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    # `create configmap --from-literal=a/b=1` is refused by kubectl itself; a manifest reaches the server
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"},
                                        "data": {"a/b": "1"}}))
    r = kubectl.run("create", "-f", str(manifest))
    assert r.returncode != 0
    assert 'The ConfigMap "bad" is invalid: data[a/b]: Invalid value: "a/b": a valid config key' in r.stderr, r
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"},
                                        "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}}))
    r = kubectl.run("apply", "-f", str(manifest))
    assert r.returncode != 0 and 'The Secret "bad" is invalid: data[tls.key]: Required value' in r.stderr, r
    assert stored_names(cluster, "secrets", namespace) == set()
    manifest = tmp_path / "immutable.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
                                        "immutable": True, "data": {"a": "1"}}))
    kubectl.run("apply", "-f", str(manifest)).ok()
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
                                        "immutable": True, "data": {"a": "2"}}))
    r = kubectl.run("apply", "-f", str(manifest))
    assert r.returncode != 0 and "data: Forbidden: field is immutable when `immutable` is set" in r.stderr, r
    assert stored_names(cluster, "configmaps", namespace) == {"frozen"}


# -- the API: errors store nothing ---------------------------------------------------------------


def _status(r: httpx.Response) -> tuple[int, str, list[str]]:
    body = r.json()
    causes = [f"{c.get('field')}: {c.get('message')}" for c in (body.get("details") or {}).get("causes") or []]
    return r.status_code, body.get("reason", ""), causes


@pytest.mark.parametrize(("body", "code", "reason", "cause"), [
    ({"data": {"a/b": b64("x")}}, 422, "Invalid", "data[a/b]: Invalid value: \"a/b\": a valid config key"),
    ({"data": {"big": base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()}}, 422, "Invalid",
     "data: Too long: must have at most 1048576 bytes"),
    ({"type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}}, 422, "Invalid", "data[tls.key]: Required value"),
    ({"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{not json"}}, 422, "Invalid",
     'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>"'),
    ({"type": "kubernetes.io/service-account-token"}, 422, "Invalid",
     "metadata.annotations[kubernetes.io/service-account.name]: Required value"),
    ({"data": {"a": "not base64!"}}, 400, "BadRequest", ""),
])
def test_secret_errors_store_nothing(api: httpx.Client, cluster: Cluster, namespace: str, body: dict[str, Any],
                                     code: int, reason: str, cause: str) -> None:
    r = api.post(secrets(namespace), json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, **body})
    got_code, got_reason, causes = _status(r)
    assert (got_code, got_reason) == (code, reason), r.text
    if cause:
        assert any(c.startswith(cause) for c in causes), causes
    else:
        assert "illegal base64 data at input byte" in r.json()["message"]
    assert stored_names(cluster, "secrets", namespace) == set()


def test_updates_refused_store_nothing(api: httpx.Client, cluster: Cluster, namespace: str) -> None:
    r = api.post(secrets(namespace), json={"metadata": {"name": "s"}, "immutable": True,
                                           "stringData": {"password": PASSWORD}})
    assert r.status_code == 201, r.text
    created = r.json()
    assert "stringData" not in created and created["type"] == "Opaque"
    assert base64.b64decode(created["data"]["password"]).decode() == PASSWORD
    before = raw(cluster, f"/registry/secrets/{namespace}/s")
    for patch, cause in (({"data": {"password": b64("other")}}, "data: Forbidden: field is immutable when"),
                         ({"stringData": {"password": "other"}}, "data: Forbidden: field is immutable when"),
                         ({"immutable": False}, "immutable: Forbidden: field is immutable when"),
                         ({"type": "kubernetes.io/basic-auth"}, 'type: Invalid value: "kubernetes.io/basic-auth": '
                                                               "field is immutable")):
        r = api.patch(f"{secrets(namespace)}/s", json=patch,
                      headers={"Content-Type": "application/merge-patch+json"})
        code, reason, causes = _status(r)
        assert (code, reason) == (422, "Invalid") and any(c.startswith(cause) for c in causes), r.text
    assert raw(cluster, f"/registry/secrets/{namespace}/s") == before  # not even re-encrypted
    # metadata still changes; stringData merges on update and is not returned
    r = api.patch(f"{secrets(namespace)}/s", json={"metadata": {"labels": {"a": "b"}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["metadata"]["labels"] == {"a": "b"}, r.text
    assert api.get(f"{secrets(namespace)}/s?fieldSelector=type=Opaque").status_code == 200
    listed = api.get(secrets(namespace), params={"fieldSelector": "type=Opaque"}).json()["items"]
    assert [s["metadata"]["name"] for s in listed] == ["s"]


def test_configmap_errors(api: httpx.Client, cluster: Cluster, namespace: str) -> None:
    too_big = {"metadata": {"name": "big"}, "data": {"a": "x" * (1024 * 1024 - 2)}, "binaryData": {"b": b64("yyy")}}
    code, reason, causes = _status(api.post(configmaps(namespace), json=too_big))
    assert (code, reason, causes) == (422, "Invalid", [": Too long: must have at most 1048576 bytes"])
    clash = {"metadata": {"name": "clash"}, "data": {"k": "v"}, "binaryData": {"k": b64("v")}}
    code, _, causes = _status(api.post(configmaps(namespace), json=clash))
    assert code == 422 and causes == ['data[k]: Invalid value: "k": duplicate of key present in binaryData']
    r = api.post(configmaps(namespace), json={"metadata": {"name": "b"}, "binaryData": {"k": "%%%"}})
    assert r.status_code == 400 and "illegal base64 data" in r.json()["message"]
    assert stored_names(cluster, "configmaps", namespace) == set()


def test_watch_and_list_decrypt(api: httpx.Client, cluster: Cluster, namespace: str) -> None:
    """The watch cache is filled from etcd through the transformer: lists and watches see plaintext."""
    rv = api.get(secrets(namespace)).json()["metadata"]["resourceVersion"]
    r = api.post(secrets(namespace), json={"metadata": {"name": "w"}, "stringData": {"k": PASSWORD}})
    assert r.status_code == 201
    with api.stream("GET", secrets(namespace), params={"watch": "true", "resourceVersion": rv,
                                                       "timeoutSeconds": "5"}) as stream:
        for line in stream.iter_lines():
            event = json.loads(line)
            if event["type"] == "ADDED":
                assert base64.b64decode(event["object"]["data"]["k"]).decode() == PASSWORD
                break
        else:
            pytest.fail("no ADDED event")
    items = api.get(secrets(namespace), params={"resourceVersion": "0"}).json()["items"]  # from the cache
    assert base64.b64decode(items[0]["data"]["k"]).decode() == PASSWORD


# -- the official Python client ------------------------------------------------------------------


def test_official_python_client(cluster: Cluster, namespace: str) -> None:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = cluster.server.url
    with client.ApiClient(configuration) as api_client:
        core = client.CoreV1Api(api_client)
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="py"), data={"k": "v"}, binary_data={"b": b64("\x00\x01")}))
        core.create_namespaced_secret(namespace, client.V1Secret(
            metadata=client.V1ObjectMeta(name="py"), string_data={"password": PASSWORD}, type="Opaque"))
        cm = core.read_namespaced_config_map("py", namespace)
        assert cm.data == {"k": "v"} and cm.binary_data == {"b": b64("\x00\x01")}
        secret = core.read_namespaced_secret("py", namespace)
        assert secret.string_data is None
        assert base64.b64decode(secret.data["password"]).decode() == PASSWORD
        core.patch_namespaced_secret("py", namespace, {"stringData": {"extra": "1"}})
        assert sorted(core.read_namespaced_secret("py", namespace).data) == ["extra", "password"]
        names = [s.metadata.name for s in core.list_namespaced_secret(namespace).items]
        assert names == ["py"]
        from kubernetes.client.exceptions import ApiException

        with pytest.raises(ApiException) as e:
            core.create_namespaced_config_map(namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="bad"), data={"no/slash": "x"}))
        assert e.value.status == 422
        core.delete_namespaced_secret("py", namespace)
        core.delete_namespaced_config_map("py", namespace)
    assert stored_names(cluster, "secrets", namespace) == set()


# -- key rotation (last: it restarts the apiserver) ----------------------------------------------


def test_z_key_rotation(api: httpx.Client, cluster: Cluster, namespace: str) -> None:
    """upstream's rotation: add key2 first (restart), old objects still read with key1; rewriting them
    uses key2; with key1 gone (after all are rewritten), everything still reads."""
    for name in ("old", "rewritten"):
        assert api.post(secrets(namespace), json={"metadata": {"name": name},
                                                  "stringData": {"p": PASSWORD}}).status_code == 201
    assert raw(cluster, f"/registry/secrets/{namespace}/old").startswith(b"k8s:enc:aescbc:v1:key1:")

    encryption_config(cluster.config, ("key2", KEY2), ("key1", KEY1))
    cluster.server.restart()
    old = api.get(f"{secrets(namespace)}/old")
    assert old.status_code == 200 and base64.b64decode(old.json()["data"]["p"]).decode() == PASSWORD
    assert raw(cluster, f"/registry/secrets/{namespace}/old").startswith(b"k8s:enc:aescbc:v1:key1:")
    # a write (upstream: `kubectl get secrets -o json | kubectl replace -f -`) re-encrypts with key2
    r = api.patch(f"{secrets(namespace)}/rewritten", json={"metadata": {"labels": {"rotated": "yes"}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    rewritten = raw(cluster, f"/registry/secrets/{namespace}/rewritten")
    assert rewritten.startswith(b"k8s:enc:aescbc:v1:key2:") and PASSWORD.encode() not in rewritten
    created = api.post(secrets(namespace), json={"metadata": {"name": "new"}, "stringData": {"p": PASSWORD}})
    assert created.status_code == 201
    assert raw(cluster, f"/registry/secrets/{namespace}/new").startswith(b"k8s:enc:aescbc:v1:key2:")

    # key1 removed: what only key1 wrote no longer decrypts (500, as upstream), key2's still does
    encryption_config(cluster.config, ("key2", KEY2))
    cluster.server.restart()
    assert api.get(f"{secrets(namespace)}/new").status_code == 200
    broken = api.get(f"{secrets(namespace)}/old")
    assert broken.status_code == 500 and broken.json()["reason"] == "InternalError", broken.text
    assert "unable to transform key" in broken.json()["message"]
    # the watch cache stays up without it (the apiserver is ready; upstream logs the object as corrupt)
    cached = api.get(secrets(namespace), params={"resourceVersion": "0"}).json()["items"]
    assert {s["metadata"]["name"] for s in cached} == {"rewritten", "new"}
    # back to both keys so the module's namespace can be cleaned up
    encryption_config(cluster.config, ("key2", KEY2), ("key1", KEY1))
    cluster.server.restart()
    assert api.get(f"{secrets(namespace)}/old").status_code == 200


def test_bad_encryption_config_stops_the_apiserver(cluster: Cluster, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                   "resources": [{"resources": ["secrets"], "providers": [
                                       {"aescbc": {"keys": [{"name": "k", "secret": b64("short")}]}}]}]}))
    server = ApiServer(tmp_path, cluster.etcd, "--encryption-provider-config", str(bad))
    server.process.start()
    assert server.process.proc is not None
    assert server.process.proc.wait(30) != 0
    assert "secret is not of the expected length, got 5, expected one of [16 24 32]" in server.process.log_tail()


# -- the Node authorizer and the audit log (a secure apiserver: kubelets as system:node:NAME) ------


def _pod(name: str, node: str, secret: str, configmap: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeName": node,
        "containers": [{"name": "app", "image": "minik8s/busybox:1.35",
                        "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": secret, "key": "p"}}}],
                        "envFrom": [{"configMapRef": {"name": configmap}}]}]}}


def test_kubelets_read_only_what_their_pods_use(cluster: Cluster, tmp_path: Path) -> None:
    from tests.auth_cluster import SecureApiServer, wait_until_allowed

    config = encryption_config(tmp_path / "encryption-config.yaml", ("key1", KEY1))
    server = SecureApiServer(tmp_path, cluster.etcd, "--encryption-provider-config", str(config)).start()
    ns = f"node-{uuid.uuid4().hex[:6]}"
    try:
        with server.plain_client() as admin, server.client("kubelet-node-a") as node_a:
            assert admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
            for suffix in ("a", "b"):
                assert admin.post(secrets(ns), json={"metadata": {"name": f"s-{suffix}"},
                                                     "stringData": {"p": PASSWORD}}).status_code == 201
                assert admin.post(configmaps(ns), json={"metadata": {"name": f"c-{suffix}"},
                                                        "data": {"k": "v"}}).status_code == 201
                r = admin.post(f"/api/v1/namespaces/{ns}/pods",
                               json=_pod(f"p-{suffix}", f"node-{suffix}", f"s-{suffix}", f"c-{suffix}"))
                assert r.status_code == 201, r.text
            wait_until_allowed(node_a, "GET", f"{secrets(ns)}/s-a", True)
            secret = node_a.get(f"{secrets(ns)}/s-a").json()
            assert base64.b64decode(secret["data"]["p"]).decode() == PASSWORD
            assert node_a.get(f"{configmaps(ns)}/c-a").status_code == 200
            assert node_a.get(secrets(ns), params={"fieldSelector": "metadata.name=s-a"}).status_code == 200
            # a Secret and a ConfigMap used only on node-b, and any list
            denied = node_a.get(f"{secrets(ns)}/s-b")
            assert denied.status_code == 403, denied.text
            assert "no relationship found between node 'node-a' and this object" in denied.json()["message"]
            assert node_a.get(f"{configmaps(ns)}/c-b").status_code == 403
            assert node_a.get(secrets(ns)).status_code == 403
            assert node_a.get(secrets(ns), params={"fieldSelector": "metadata.name=s-b"}).status_code == 403
            assert node_a.put(f"{secrets(ns)}/s-a", json=secret).status_code == 403
            # the edge goes with the pod
            assert admin.delete(f"/api/v1/namespaces/{ns}/pods/p-a",
                                params={"gracePeriodSeconds": "0"}).status_code == 200
            wait_until_allowed(node_a, "GET", f"{secrets(ns)}/s-a", False)
            admin.delete(f"/api/v1/namespaces/{ns}")
        # the audit log (Metadata for every request) never holds a Secret's value
        events = server.audit_events()
        assert any(e["objectRef"].get("resource") == "secrets" for e in events if e.get("objectRef"))
        assert PASSWORD not in server.audit_log.read_text() and b64(PASSWORD) not in server.audit_log.read_text()
    finally:
        server.stop()
