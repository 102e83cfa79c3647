"""etcd behind TLS (issue 10, finding 7): any process on the host reached etcd's client port with no TLS
and no credentials, and so read and wrote every object, Secrets and tokens included.

Against a real etcd serving client and peer TLS with `--client-cert-auth` and its own CA (etcd/ca.crt,
apart from the cluster CA: tests.cluster.EtcdTLSFiles, made by apiserver.auth.pki.ensure_etcd_pki) and a
real apiserver given `--etcd-cafile/--etcd-certfile/--etcd-keyfile` (kube-apiserver-etcd-client): the
apiserver works; etcd refuses plain gRPC and HTTP, TLS without a certificate, and certificates of any other
CA — the cluster CA's kubernetes-admin (system:masters) among them. Three members talk peer TLS, and their
peer port refuses a peer without a certificate.
"""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from apiserver.auth import pki
from tests.auth_cluster import SecureApiServer
from tests.cluster import ApiServer, Etcd, etcd_read, make_workdir
from tests.etcd_cluster import EtcdCluster


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[Etcd, SecureApiServer]]:
    workdir = make_workdir("minik8s-etcd-tls-")
    etcd = Etcd(workdir, tls=True)
    apiserver = SecureApiServer(workdir, etcd, *etcd.apiserver_args)
    try:
        etcd.start()
        apiserver.start()
        yield etcd, apiserver
    finally:
        apiserver.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def trusting(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


def plain_endpoint(etcd: Etcd) -> str:
    return etcd.endpoint.replace("https://", "http://")


def test_the_apiserver_works_through_etcd_with_its_client_certificate(secured: tuple[Etcd, SecureApiServer]) -> None:
    etcd, apiserver = secured
    assert etcd.endpoint.startswith("https://") and etcd.tls is not None
    with apiserver.client("admin") as api:
        r = api.post("/api/v1/namespaces", json={"metadata": {"name": "behind-tls"}})
        assert r.status_code == 201, r.text
        assert api.get("/api/v1/namespaces/behind-tls").json()["metadata"]["name"] == "behind-tls"
    # the apiserver's certificate (kube-apiserver-etcd-client) is what gets in
    tls = etcd.tls
    assert etcd_read(etcd.endpoint, ca=tls.ca, cert=tls.client_cert, key=tls.client_key).startswith("ok: ")
    cert = x509.load_pem_x509_certificate(tls.client_cert.read_bytes())
    assert cert.subject.rfc4514_string() == f"CN={pki.ETCD_CLIENT_USER}"
    assert cert.issuer.rfc4514_string() == f"CN={pki.ETCD_CA_NAME}"  # etcd's CA, not the cluster's


def test_etcd_refuses_a_client_without_a_certificate(secured: tuple[Etcd, SecureApiServer]) -> None:
    etcd, _ = secured
    assert etcd.tls is not None
    # plain gRPC (what reached every object before) and plain HTTP to the TLS port
    assert etcd_read(plain_endpoint(etcd)).startswith("UNAVAILABLE"), etcd_read(plain_endpoint(etcd))
    with pytest.raises(httpx.HTTPError):  # etcd hangs up on it
        httpx.post(f"{plain_endpoint(etcd)}/v3/kv/range", json={"key": "Lw=="}, timeout=5, trust_env=False)
    # TLS that trusts etcd, without a client certificate
    answer = etcd_read(etcd.endpoint, ca=etcd.tls.ca)
    assert answer.startswith("UNAVAILABLE"), answer
    with pytest.raises((httpx.HTTPError, ssl.SSLError)):
        httpx.post(f"{etcd.endpoint}/v3/kv/range", json={"key": "Lw=="}, verify=trusting(etcd.tls.ca), timeout=5,
                   trust_env=False)


def test_etcd_refuses_a_certificate_of_another_ca(secured: tuple[Etcd, SecureApiServer]) -> None:
    etcd, apiserver = secured
    assert etcd.tls is not None
    # the cluster CA's kubernetes-admin, system:masters: everything in the API, nothing in etcd
    admin_cert, admin_key = apiserver.pki.cert("admin"), apiserver.pki.key("admin")
    answer = etcd_read(etcd.endpoint, ca=etcd.tls.ca, cert=admin_cert, key=admin_key)
    assert answer.startswith("UNAVAILABLE"), answer
    # a CA of one's own, with a certificate named like the apiserver's
    other = Path(apiserver.workdir) / "other-ca"
    ca = pki.CA.create("etcd-ca")
    cert, key = ca.issue(pki.ETCD_CLIENT_USER)
    other.mkdir(exist_ok=True)
    (other / "client.crt").write_bytes(pki.cert_pem(cert))
    (other / "client.key").write_bytes(pki.key_pem(key))
    answer = etcd_read(etcd.endpoint, ca=etcd.tls.ca, cert=other / "client.crt", key=other / "client.key")
    assert answer.startswith("UNAVAILABLE"), answer
    with pytest.raises((httpx.HTTPError, ssl.SSLError)):
        httpx.post(f"{etcd.endpoint}/v3/kv/range", json={"key": "Lw=="}, timeout=5, trust_env=False,
                   verify=trusting(etcd.tls.ca, other / "client.crt", other / "client.key"))


def test_three_members_talk_peer_tls_and_refuse_a_peer_without_a_certificate() -> None:
    workdir = make_workdir("minik8s-etcd-tls-ha-")
    etcd = EtcdCluster(workdir, 3, tls=True)
    apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")  # type: ignore[arg-type]
    try:
        etcd.start()  # healthy: the three elected a leader over peer TLS
        assert all(m.peer_url.startswith("https://") for m in etcd.members)
        apiserver.start()
        r = httpx.post(f"{apiserver.url}/api/v1/namespaces", json={"metadata": {"name": "ha-behind-tls"}}, timeout=10)
        assert r.status_code == 201, r.text
        assert etcd.tls is not None
        peer = etcd.members[1].peer_url
        with pytest.raises((httpx.HTTPError, ssl.SSLError)):  # etcd's peer API, as another member would call it
            httpx.get(f"{peer}/members", verify=trusting(etcd.tls.ca), timeout=5, trust_env=False)
        with etcd.tls.http() as client:  # the peer certificate is what it takes (here: the apiserver's, same CA)
            assert client.get(f"{peer}/members").status_code == 200
    finally:
        apiserver.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)
