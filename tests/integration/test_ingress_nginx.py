"""The ingress controller (`python -m ingress_nginx`) with the host's real nginx, against a real apiserver and
etcd, proxying to real backends (minik8s/httpd:1 containers on a Docker network of the module's own; Services and
EndpointSlices written by hand, as for selector-less Services, so no kube-proxy and no kubelet is needed: the
upstreams are the endpoint addresses). One controller for the module, on free ports and a run directory of its
own: two hosts to two Services, Prefix vs Exact, TLS by SNI from a Secret (the certificate read with a real TLS
client), the default backend's 404, an endpoint added under load (a graceful reload, no failed request),
status.loadBalancer, DefaultIngressClass, `kubectl create ingress` (1.27 and 1.33), and bad input: a path-type
mismatch (422), a missing TLS Secret (event, fallback certificate), a configuration nginx -t refuses (the running
one stays). Nothing is left after: no nginx process, no run directory, no container, no network."""

from __future__ import annotations

import base64
import datetime
import http.client
import os
import shutil
import signal
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from machinery.netutil import default_node_ip
from tests.auth_cluster import SecureApiServer
from tests.cluster import ApiServer, Etcd, wait_for
from tests.ingress_process import Backends, IngressController, endpoint_slice, get
from tests.integration.test_mkubectl import Mk, same_output
from tests.kubectl import Kubectl, find_kubectl

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()),
                                reason="no nginx on this host (apt-get install nginx-light)")

TAG = uuid.uuid4().hex[:6]
NS = f"ingress-it-{TAG}"
CLASS = f"nginx-{TAG}"
NETWORKING = "/apis/networking.k8s.io/v1"
ELECTION_ID = f"lead-{TAG}"


def served_certificate(port: int, sni: str) -> x509.Certificate:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=sni) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def https_get(port: int, host: str, path: str) -> tuple[int, str]:
    """One GET over TLS with SNI and Host `host` (the certificate is not verified: the test reads it itself)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with httpx.Client(verify=context, timeout=5) as client:
        r = client.get(f"https://127.0.0.1:{port}{path}", headers={"Host": host}, extensions={"sni_hostname": host})
        return r.status_code, r.text.strip()


def common_name(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def tls_secret(name: str, cn: str) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
            .sign(key, hashes.SHA256()))
    crt = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(pem_key).decode()}}


def ingress(name: str, rules: list[dict[str, Any]], tls: list[dict[str, Any]] | None = None,
            annotations: dict[str, str] | None = None, class_name: str | None = CLASS) -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": rules}
    if class_name:
        spec["ingressClassName"] = class_name
    if tls:
        spec["tls"] = tls
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}}, "spec": spec}


def rule(host: str, *paths: tuple[str, str, str]) -> dict[str, Any]:
    return {"host": host, "http": {"paths": [
        {"path": p, "pathType": t, "backend": {"service": {"name": svc, "port": {"number": 80}}}}
        for p, t, svc in paths]}}


@pytest.fixture(scope="module")
def api(apiserver: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver.url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def backends() -> Iterator[Backends]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine for the backends: {e}")
    b = Backends(f"ingresstest-{TAG}")
    try:
        b.add("a0")
        b.add("b0")
        yield b
    finally:
        b.remove()


@pytest.fixture(scope="module")
def cluster(apiserver: ApiServer, api: httpx.Client, backends: Backends) -> Iterator[IngressController]:
    r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert r.status_code == 201, r.text
    controller = IngressController(apiserver.url, CLASS, NS, "--allow-snippet-annotations", "true",
                                   "--sync-period-min", "50ms", election_id=ELECTION_ID)
    try:
        r = api.post(f"{NETWORKING}/ingressclasses", json={
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": CLASS},
            "spec": {"controller": "k8s.io/ingress-nginx"}})
        assert r.status_code == 201, r.text
        for svc, ip in (("svc-a", backends.ips["a0"]), ("svc-b", backends.ips["b0"])):
            r = api.post(f"/api/v1/namespaces/{NS}/services", json={
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": NS},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 80}]}})
            assert r.status_code == 201, r.text
            r = api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
                         json=endpoint_slice(NS, svc, [ip]))
            assert r.status_code == 201, r.text
        controller.start()
        yield controller
    finally:
        controller.stop()
        api.delete(f"/api/v1/namespaces/{NS}")
        api.delete(f"{NETWORKING}/ingressclasses/{CLASS}")


def create(api: httpx.Client, obj: dict[str, Any]) -> None:
    plural = {"Ingress": f"{NETWORKING}/namespaces/{NS}/ingresses", "Secret": f"/api/v1/namespaces/{NS}/secrets"}
    r = api.post(plural[obj["kind"]], json=obj)
    assert r.status_code == 201, r.text


def routed(c: IngressController, host: str, path: str, expect: tuple[int, str], timeout: float = 20) -> None:
    """Until `host``path` answers `expect` and the reload is over (the old workers, which may still answer a
    new connection with the old configuration now and then, have exited)."""
    wait_for(lambda: get("127.0.0.1", c.http, host, path) == expect, timeout,
             what=f"{host}{path} answering {expect} (last: {get('127.0.0.1', c.http, host, path)})")
    c.settled(timeout)





def events(api: httpx.Client, name: str) -> list[dict[str, Any]]:
    items = api.get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def test_two_hosts_to_two_services_and_the_default_backend(api: httpx.Client,
                                                           cluster: IngressController) -> None:
    create(api, ingress("hosts", [rule("a.example.com", ("/", "Prefix", "svc-a")),
                                  rule("b.example.com", ("/", "Prefix", "svc-b"))]))
    routed(cluster, "a.example.com", "/", (200, "a0"))
    routed(cluster, "b.example.com", "/", (200, "b0"))
    assert get("127.0.0.1", cluster.http, "unknown.example.com", "/") == (404, "default backend - 404")
    big = httpx.get(f"http://127.0.0.1:{cluster.http}/big", headers={"Host": "b.example.com"}, timeout=10)
    assert (big.status_code, len(big.content)) == (200, 2 << 20)  # buffered through nginx's tmp/ by its workers
    # upstreams are the endpoint addresses, never a ClusterIP
    assert "server " + api.get(f"/api/v1/namespaces/{NS}/services/svc-a").json()["spec"]["clusterIP"] \
        not in cluster.conf()
    # the leader writes status.loadBalancer: this host's address
    wait_for(lambda: api.get(f"{NETWORKING}/namespaces/{NS}/ingresses/hosts").json()["status"]["loadBalancer"]
             .get("ingress") == [{"ip": default_node_ip()}], 30, what="status.loadBalancer")
    assert any(e["reason"] == "Sync" for e in events(api, "hosts"))


def test_prefix_and_exact(api: httpx.Client, cluster: IngressController) -> None:
    create(api, ingress("paths", [rule("p.example.com", ("/exact", "Exact", "svc-a"), ("/app", "Prefix", "svc-b"))]))
    routed(cluster, "p.example.com", "/exact", (200, "a0"))
    assert get("127.0.0.1", cluster.http, "p.example.com", "/exact/") == (404, "default backend - 404")
    # /app itself reaches svc-b (busybox httpd redirects a directory to its slash form), not the default backend
    assert get("127.0.0.1", cluster.http, "p.example.com", "/app")[0] == 302
    assert get("127.0.0.1", cluster.http, "p.example.com", "/app/x") == (200, "b0")
    # Prefix matches by path element: /appx is not under /app
    assert get("127.0.0.1", cluster.http, "p.example.com", "/appx") == (404, "default backend - 404")


def test_tls_from_a_secret_and_the_fallback_for_a_missing_one(api: httpx.Client,
                                                              cluster: IngressController) -> None:
    create(api, tls_secret("tls-s", "s.example.com"))
    create(api, ingress("secure", [rule("s.example.com", ("/", "Prefix", "svc-a"))],
                        tls=[{"hosts": ["s.example.com"], "secretName": "tls-s"}]))
    create(api, ingress("missing", [rule("m.example.com", ("/", "Prefix", "svc-b"))],
                        tls=[{"hosts": ["m.example.com"], "secretName": "no-such-secret"}]))
    wait_for(lambda: common_name(served_certificate(cluster.https, "s.example.com")) == "s.example.com", 20,
             what="the Secret's certificate served for s.example.com")
    cluster.settled()
    assert https_get(cluster.https, "s.example.com", "/") == (200, "a0")
    # plain HTTP to a TLS host: ingress-nginx's ssl-redirect
    conn = http.client.HTTPConnection("127.0.0.1", cluster.http, timeout=5)
    conn.request("GET", "/x", headers={"Host": "s.example.com"})
    r = conn.getresponse()
    assert (r.status, r.getheader("Location")) == (308, f"https://s.example.com:{cluster.https}/x")
    conn.close()
    # the missing Secret: an event, and the fallback certificate for the host
    wait_for(lambda: any(e["reason"] == "MissingSecret" and e["type"] == "Warning"
                         for e in events(api, "missing")), 20, what="the MissingSecret event")
    assert common_name(served_certificate(cluster.https, "m.example.com")) == \
        "Kubernetes Ingress Controller Fake Certificate"


def test_an_endpoint_change_reloads_without_failed_requests(api: httpx.Client, cluster: IngressController,
                                                           backends: Backends) -> None:
    create(api, ingress("scale", [rule("scale.example.com", ("/", "Prefix", "svc-a"))]))
    routed(cluster, "scale.example.com", "/", (200, "a0"))
    results: list[tuple[int, str] | str] = []
    done = threading.Event()

    def load() -> None:
        while not done.is_set():
            try:
                results.append(get("127.0.0.1", cluster.http, "scale.example.com", "/"))
            except OSError as e:
                results.append(repr(e))

    thread = threading.Thread(target=load)
    thread.start()
    try:
        reloads = cluster.metric("nginx_ingress_controller_success")
        new_ip = backends.add("a1")
        path = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/svc-a-1"
        eps = api.get(path).json()
        eps["endpoints"].append({"addresses": [new_ip], "conditions": {"ready": True}})
        assert api.put(path, json=eps).status_code == 200
        wait_for(lambda: f"server {new_ip}:80" in cluster.conf(), 20, what="the new endpoint rendered")
        wait_for(lambda: cluster.metric("nginx_ingress_controller_success") > reloads, 20, what="a reload")
        wait_for(lambda: {b for _, b in [r for r in results[-50:] if isinstance(r, tuple)]} >= {"a0", "a1"}, 20,
                 what="both endpoints answering")
    finally:
        done.set()
        thread.join(10)
    failed = [r for r in results if r not in ((200, "a0"), (200, "a1"))]
    assert failed == [], f"{len(failed)} of {len(results)} requests failed: {failed[:5]}"
    assert len(results) > 20


def test_a_path_type_mismatch_is_refused_with_upstreams_message(api: httpx.Client,
                                                                cluster: IngressController) -> None:
    bad = ingress("bad", [{"host": "x.example.com", "http": {"paths": [
        {"path": "foo", "pathType": "Exact", "backend": {"service": {"name": "svc-a", "port": {"number": 80}}}}]}}])
    r = api.post(f"{NETWORKING}/namespaces/{NS}/ingresses", json=bad)
    assert r.status_code == 422, r.text
    assert r.json()["reason"] == "Invalid"
    assert r.json()["message"] == ('Ingress.networking.k8s.io "bad" is invalid: spec.rules[0].http.paths[0].path: '
                                   'Invalid value: "foo": must be an absolute path')
    bad["spec"]["rules"][0]["http"]["paths"][0].pop("pathType")
    r = api.post(f"{NETWORKING}/namespaces/{NS}/ingresses", json=bad)
    assert r.status_code == 422 and "pathType: Required value: pathType must be specified" in r.json()["message"]
    assert api.get(f"{NETWORKING}/namespaces/{NS}/ingresses/bad").status_code == 404  # nothing half-written


def test_a_configuration_nginx_refuses_never_replaces_the_running_one(api: httpx.Client,
                                                                      cluster: IngressController) -> None:
    routed(cluster, "b.example.com", "/", (200, "b0"))
    before, failures = cluster.conf(), cluster.metric("nginx_ingress_controller_config_test_failures")
    create(api, ingress("broken", [rule("broken.example.com", ("/", "Prefix", "svc-a"))],
                        annotations={"nginx.ingress.kubernetes.io/configuration-snippet": "no_such_directive on;"}))
    wait_for(lambda: cluster.metric("nginx_ingress_controller_config_test_failures") > failures, 20,
             what="nginx -t refusing the configuration")
    assert cluster.conf() == before
    assert cluster.metric("nginx_ingress_controller_config_last_reload_successful") == 0
    assert get("127.0.0.1", cluster.http, "b.example.com", "/") == (200, "b0")
    assert get("127.0.0.1", cluster.http, "broken.example.com", "/") == (404, "default backend - 404")
    wait_for(lambda: any(e["reason"] == "RELOAD" for e in events(api, "broken")), 20, what="the RELOAD event")
    assert api.delete(f"{NETWORKING}/namespaces/{NS}/ingresses/broken").status_code == 200
    wait_for(lambda: cluster.metric("nginx_ingress_controller_config_last_reload_successful") == 1, 20,
             what="the next good configuration loaded")


def test_default_ingress_class(api: httpx.Client, cluster: IngressController) -> None:
    path = f"{NETWORKING}/ingressclasses/{CLASS}"
    klass = api.get(path).json()
    klass["metadata"]["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    assert api.put(path, json=klass).status_code == 200
    try:
        create(api, ingress("defaulted", [rule("d.example.com", ("/", "Prefix", "svc-b"))], class_name=None))
        got = api.get(f"{NETWORKING}/namespaces/{NS}/ingresses/defaulted").json()
        assert got["spec"]["ingressClassName"] == CLASS
        routed(cluster, "d.example.com", "/", (200, "b0"))
    finally:
        klass = api.get(path).json()
        klass["metadata"]["annotations"] = {}
        assert api.put(path, json=klass).status_code == 200


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_create_ingress(version: str, apiserver: ApiServer, api: httpx.Client,
                                cluster: IngressController) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"no kubectl {version}")
    kubectl = Kubectl(binary, version, apiserver.url, cluster.workdir / f"kubectl-{version}", NS)
    host = f"k{version.replace('.', '')}.example.com"
    created = kubectl.run("create", "ingress", f"kc-{version.replace('.', '')}", f"--class={CLASS}",
                          f"--rule={host}/=svc-a:80", f"--rule={host}/b*=svc-b:80,tls=tls-k", "-v=8").ok()
    # kubectl 1.33's typed client sends it as protobuf (apiserver/protobuf.py decodes it); 1.27 JSON
    assert ("Content-Type: application/vnd.kubernetes.protobuf" in created.stderr) == (version == "1.33")
    # TLS for the host (with a Secret that does not exist: the fallback certificate), so over HTTPS
    wait_for(lambda: https_get(cluster.https, host, "/") == (200, "a0"), 20, what=f"{host}/ over HTTPS")
    cluster.settled()
    status, body = https_get(cluster.https, host, "/b/x")  # routed to svc-b's httpd, which has no /b/x
    assert status == 404 and "default backend" not in body
    got = api.get(f"{NETWORKING}/namespaces/{NS}/ingresses/kc-{version.replace('.', '')}").json()
    paths = got["spec"]["rules"][0]["http"]["paths"]
    assert [(p["path"], p["pathType"]) for p in paths] == [("/", "Exact"), ("/b", "Prefix")]
    assert got["spec"]["tls"] == [{"hosts": [host], "secretName": "tls-k"}]
    table = kubectl.run("get", "ingress", f"kc-{version.replace('.', '')}").ok().stdout
    assert table.split("\n")[0].split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert table.split("\n")[1].split()[:3] == [f"kc-{version.replace('.', '')}", CLASS, host]
    wait_for(lambda: default_node_ip() in kubectl.run("get", "ingress").ok().stdout, 30, what="ADDRESS shown")
    if version == "1.33":  # mkubectl describes an Ingress and its class as kubectl does, byte for byte
        mk = Mk(apiserver.url, cluster.workdir / "mk", NS)
        described = same_output(mk, kubectl, "describe", "ingress", f"kc-{version.replace('.', '')}")
        assert f"tls-k terminates {host}" in described and "svc-b:80 (" in described
        same_output(mk, kubectl, "describe", "ingressclass", CLASS)


def normalized(c: IngressController) -> str:
    return c.conf().replace(str(c.run_dir), "RUN").replace(f":{c.http}", ":HTTP").replace(f":{c.https}", ":HTTPS")


def test_a_second_replica_serves_too_but_only_the_leader_writes_status(apiserver: ApiServer, api: httpx.Client,
                                                                       cluster: IngressController) -> None:
    routed(cluster, "b.example.com", "/", (200, "b0"))
    wait_for(lambda: cluster.metric("nginx_ingress_controller_leader_election_status") == 1, 30,
             what="the module's controller leading")
    second = IngressController(apiserver.url, CLASS, NS, "--publish-status-address", "192.0.2.7",
                               election_id=ELECTION_ID)
    try:
        second.start()
        assert get("127.0.0.1", second.http, "b.example.com", "/") == (200, "b0")
        assert normalized(second) == normalized(cluster)  # the same configuration, its own ports and files
        assert second.metric("nginx_ingress_controller_leader_election_status") == 0
        lb = api.get(f"{NETWORKING}/namespaces/{NS}/ingresses/hosts").json()["status"]["loadBalancer"]
        assert lb["ingress"] == [{"ip": default_node_ip()}]  # the follower's address is never written
    finally:
        second.stop()
    assert not second.run_dir.exists()


def test_local_ups_ingress_class_manifest_applies(apiserver: ApiServer, api: httpx.Client,
                                                  cluster: IngressController) -> None:
    """examples/ingress-nginx-class.yaml, as hack/local-up-cluster.sh applies it with mkubectl."""
    mk = Mk(apiserver.url, cluster.workdir / "mk-apply", NS)
    manifest = Path(__file__).resolve().parents[2] / "examples" / "ingress-nginx-class.yaml"
    try:
        assert mk.run("apply", "-f", str(manifest)).ok().stdout.strip() == \
            "ingressclass.networking.k8s.io/nginx created"
        got = api.get(f"{NETWORKING}/ingressclasses/nginx").json()
        assert got["spec"] == {"controller": "k8s.io/ingress-nginx"}
        assert mk.run("apply", "-f", str(manifest)).ok().stdout.strip() == \
            "ingressclass.networking.k8s.io/nginx unchanged"
    finally:
        api.delete(f"{NETWORKING}/ingressclasses/nginx")


def test_runs_as_system_ingress_nginx_through_the_gate(workdir: Path, own_etcd: Etcd, backends: Backends) -> None:
    """local-up's way: the controller as system:ingress-nginx (its kubeconfig from the cluster PKI) on an apiserver
    with authn, RBAC and audit: it reads what it renders, campaigns for ingress-nginx-leader in kube-system, writes
    status (audited as itself), and may not change an Ingress's spec (403)."""
    secure = SecureApiServer(workdir, own_etcd).start()
    controller = IngressController(secure.secure_url, "nginx", "kube-system", election_id="ingress-nginx-leader",
                                   kubeconfig=secure.kubeconfig("ingress-nginx"))
    base = f"{NETWORKING}/namespaces/default/ingresses"
    try:
        with secure.client("admin") as admin:
            for path, body in (
                    (f"{NETWORKING}/ingressclasses", {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                                                      "metadata": {"name": "nginx"},
                                                      "spec": {"controller": "k8s.io/ingress-nginx"}}),
                    ("/api/v1/namespaces/default/services", {
                        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 80}]}}),
                    ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                     endpoint_slice("default", "web", [backends.ips["b0"]])),
                    (base, {**ingress("gated", [rule("gated.example.com", ("/", "Prefix", "web"))],
                                      class_name="nginx"), "metadata": {"name": "gated"}})):
                r = admin.post(path, json=body)
                assert r.status_code == 201, r.text
            controller.start()
            routed(controller, "gated.example.com", "/", (200, "b0"))
            wait_for(lambda: admin.get(f"{base}/gated").json()["status"]["loadBalancer"].get("ingress"), 30,
                     what="status written by the controller")
        secure.wait_audit(lambda e: e.get("verb") == "update" and e.get("objectRef", {}).get("subresource") == "status"
                          and e.get("objectRef", {}).get("resource") == "ingresses"
                          and e["user"]["username"] == "system:ingress-nginx"
                          and (e.get("responseStatus") or {}).get("code") == 200, what="system:ingress-nginx's update")
        with secure.client("ingress-nginx") as me:
            got = me.get(f"{base}/gated").json()
            got["spec"]["rules"][0]["host"] = "hijacked.example.com"
            r = me.put(f"{base}/gated", json=got)
            assert r.status_code == 403 and r.json()["reason"] == "Forbidden"
            assert me.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ingress-nginx-leader") \
                .json()["spec"]["holderIdentity"]
    finally:
        controller.stop()
        secure.stop()


def test_nginx_or_controller_killed(apiserver: ApiServer, api: httpx.Client, cluster: IngressController) -> None:
    """nginx killed: the controller exits (its supervisor starts it again); the controller killed: its nginx runs on
    without it, and the next controller on the same run dir stops that stale master and serves again."""
    create(api, ingress("killed", [rule("k.example.com", ("/", "Prefix", "svc-b"))]))
    routed(cluster, "k.example.com", "/", (200, "b0"))
    third = IngressController(apiserver.url, CLASS, NS, "--update-status", "false")
    try:
        third.start()
        master = int((third.run_dir / "nginx.pid").read_text())
        os.kill(master, signal.SIGKILL)
        assert third.process.proc is not None
        assert third.process.proc.wait(30) == 1
        assert "NGINX process has stopped" in third.process.log_tail()
        third.start()
        assert get("127.0.0.1", third.http, "k.example.com", "/") == (200, "b0")
        stale = int((third.run_dir / "nginx.pid").read_text())
        third.process.kill()
        assert get("127.0.0.1", third.http, "k.example.com", "/") == (200, "b0")  # nginx serves on alone
        third.start()
        wait_for(lambda: not Path(f"/proc/{stale}").exists(), 20, what="the stale nginx master stopped")
        routed(third, "k.example.com", "/", (200, "b0"))
    finally:
        third.stop()
