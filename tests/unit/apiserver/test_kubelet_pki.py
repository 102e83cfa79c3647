"""The certificates apiserver→kubelet TLS needs, without processes: the apiserver's kubelet-client
identity, each node's serving certificate (its SANs, reuse, re-issue for new SANs), the CLI that
issues one for a container's addresses, and the apiserver's TLS context towards kubelets."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.auth import pki
from apiserver.endpoints.proxy import client_tls, kubelet_address
from machinery.authn.user import user_from_peercert


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(cert: x509.Certificate) -> set[str]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(n.value) for n in names}


def test_kubelet_client_and_serving_certificates(tmp_path: Path) -> None:
    layout = pki.ensure_kubelet_pki(tmp_path, ["node-x"], kubelet_hosts=["10.1.2.3"])
    client = _load(layout.kubelet_client_cert)
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver-kubelet-client"
    assert client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    serving = _load(layout.kubelet_serving_cert("node-x"))
    assert layout.kubelet_serving_cert("node-x") == tmp_path.resolve() / "pki" / "kubelets" / "node-x" / "kubelet.crt"
    assert serving.subject.rfc4514_string() == "CN=system:node:node-x,O=system:nodes"
    usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]  # not usable as a client certificate
    assert {"node-x", "10.1.2.3", "127.0.0.1", "localhost"} <= _sans(serving)
    serving.verify_directly_issued_by(_load(layout.ca_cert))
    assert layout.kubelet_serving_key("node-x").stat().st_mode & 0o777 == 0o600
    # reused as long as it holds what is asked; re-issued for a new address
    pem = layout.kubelet_serving_cert("node-x").read_bytes()
    pki.ensure_kubelet_pki(tmp_path, ["node-x"], kubelet_hosts=["10.1.2.3"])
    assert layout.kubelet_serving_cert("node-x").read_bytes() == pem
    pki.ensure_kubelet_pki(tmp_path, ["node-x"], kubelet_hosts=["10.9.9.9"])
    assert "10.9.9.9" in _sans(_load(layout.kubelet_serving_cert("node-x")))


def test_cli_issues_one_nodes_serving_certificate_for_given_addresses(tmp_path: Path) -> None:
    assert pki.main(["kubelet-serving-cert", "--dir", str(tmp_path), "--node", "n2", "--san", "172.30.0.5"]) == 0
    cert = _load(tmp_path / "pki" / "kubelets" / "n2" / "kubelet.crt")
    assert _sans(cert) == {"n2", "172.30.0.5"}
    # the full layout also gives the kubelet-client certificate (added, nothing renamed)
    assert pki.main(["--dir", str(tmp_path), "--node", "n2"]) == 0
    assert (tmp_path / "pki" / "apiserver-kubelet-client.crt").is_file()
    assert (tmp_path / "kubelet-n2.conf").is_file() and (tmp_path / "admin.conf").is_file()


def test_the_kubelet_client_identity_is_a_master(tmp_path: Path) -> None:
    layout = pki.ensure_kubelet_pki(tmp_path)
    cert = _load(layout.kubelet_client_cert)
    peer = {"subject": tuple(((("organizationName" if a.oid == NameOID.ORGANIZATION_NAME else "commonName"),
                                str(a.value)),) for a in cert.subject)}
    user = user_from_peercert(peer)
    assert user is not None and user.name == "kube-apiserver-kubelet-client" and user.is_master


def test_apiserver_tls_towards_kubelets(tmp_path: Path) -> None:
    layout = pki.ensure_kubelet_pki(tmp_path)
    assert client_tls(None, None, None) is None  # no flags: plain HTTP, as before
    verified = client_tls(str(layout.kubelet_client_cert), str(layout.kubelet_client_key), str(layout.ca_cert))
    assert verified is not None and verified.verify_mode == ssl.CERT_REQUIRED and verified.check_hostname
    unverified = client_tls(str(layout.kubelet_client_cert), str(layout.kubelet_client_key), None)
    assert unverified is not None and unverified.verify_mode == ssl.CERT_NONE  # upstream without the CA flag
    node = {"metadata": {"name": "n"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                                                  "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    assert kubelet_address(node, "https") == "https://10.0.0.7:10250"
    assert kubelet_address(node) == "http://10.0.0.7:10250"


def test_flags_that_go_together_and_unreadable_files_end_the_start(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from apiserver.__main__ import parse_args as apiserver_args
    from kubelet.__main__ import parse_args as kubelet_args

    layout = pki.ensure_kubelet_pki(tmp_path)
    cert, key, ca = str(layout.kubelet_client_cert), str(layout.kubelet_client_key), str(layout.ca_cert)
    bad = [
        (apiserver_args, ["--kubelet-client-certificate", cert], "go together"),
        (apiserver_args, ["--kubelet-client-certificate", cert, "--kubelet-client-key", str(tmp_path / "nope")],
         "kubelet client TLS"),
        (apiserver_args, ["--kubelet-certificate-authority", str(tmp_path / "nope.crt")], "kubelet client TLS"),
        (kubelet_args, ["--tls-cert-file", cert], "go together"),
        (kubelet_args, ["--client-ca-file", ca], "needs --tls-cert-file"),
    ]
    for parse, argv, message in bad:
        with pytest.raises(SystemExit) as exit_:
            parse(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err
    args = apiserver_args(["--kubelet-client-certificate", cert, "--kubelet-client-key", key,
                           "--kubelet-certificate-authority", ca])
    assert (args.kubelet_client_certificate, args.kubelet_certificate_authority) == (cert, ca)
    args = kubelet_args(["--tls-cert-file", cert, "--tls-private-key-file", key, "--client-ca-file", ca])
    assert args.client_ca_file == ca
