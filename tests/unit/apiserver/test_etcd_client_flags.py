"""The apiserver's etcd client flags (upstream --etcd-cafile, --etcd-certfile, --etcd-keyfile) and endpoints:
what is wrong ends the start with a message, not the first request."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver.__main__ import parse_args
from apiserver.auth import pki
from apiserver.storage.etcd import EtcdStorage, EtcdTLS


@pytest.fixture
def etcd_pki(tmp_path: Path) -> pki.Pki:
    return pki.ensure_etcd_pki(tmp_path, {"etcd": []})


def test_the_flags_make_the_client_tls(etcd_pki: pki.Pki) -> None:
    args = parse_args(["--etcd-servers", "https://etcd:2379", "--etcd-cafile", str(etcd_pki.etcd_ca_cert),
                       "--etcd-certfile", str(etcd_pki.etcd_client_cert),
                       "--etcd-keyfile", str(etcd_pki.etcd_client_key)])
    assert isinstance(args.etcd_tls, EtcdTLS) and args.etcd_tls.cert_file == str(etcd_pki.etcd_client_cert)
    assert parse_args([]).etcd_tls is None


@pytest.mark.parametrize(("flags", "message"), [
    (["--etcd-certfile", "CERT"], "etcd client TLS: --etcd-certfile and --etcd-keyfile go together"),
    (["--etcd-cafile", "/nonexistent/ca.crt"], "etcd client TLS: [Errno 2] No such file or directory"),
    (["--etcd-cafile", "NOTPEM"], "not a PEM file"),
])
def test_bad_flags_end_the_start(flags: list[str], message: str, etcd_pki: pki.Pki, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notpem").write_text("hello")
    flags = [str(etcd_pki.etcd_client_cert) if f == "CERT" else str(tmp_path / "notpem") if f == "NOTPEM" else f
             for f in flags]
    with pytest.raises(SystemExit) as e:
        parse_args(flags)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_endpoints_are_http_or_https_not_both() -> None:
    with pytest.raises(ValueError, match="mixes http:// and https://"):
        EtcdStorage(["https://a:2379", "http://b:2379"])
    with pytest.raises(ValueError, match="the scheme must be http or https"):
        EtcdStorage(["unix:///run/etcd.sock"])
    assert EtcdStorage(["127.0.0.1:2379"]).endpoints == ["127.0.0.1:2379"]  # no scheme: plain, as before


def test_pki_etcd_members_are_parsed_and_refused_when_empty() -> None:
    assert pki.parse_etcd_member("etcd-1=10.0.0.11,etcd-1.local") == ("etcd-1", ["10.0.0.11", "etcd-1.local"])
    assert pki.parse_etcd_member("etcd") == ("etcd", [])
    with pytest.raises(ValueError, match="want NAME or NAME=HOST"):
        pki.parse_etcd_member("=10.0.0.1")


def test_the_etcd_pki_is_apart_from_the_cluster_ca_and_reused(etcd_pki: pki.Pki) -> None:
    from cryptography import x509

    member = etcd_pki.etcd_member_dir("etcd")
    assert sorted(p.name for p in member.iterdir()) == ["ca.crt", "peer.crt", "peer.key", "server.crt", "server.key"]
    server = x509.load_pem_x509_certificate((member / "server.crt").read_bytes())
    assert server.issuer.rfc4514_string() == "CN=etcd-ca"
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in sans] == ["etcd", "localhost", "127.0.0.1"]
    assert not etcd_pki.ca_cert.exists()  # etcd's PKI alone makes no cluster CA
    before = (member / "server.crt").read_bytes()
    pki.ensure_etcd_pki(etcd_pki.root, {"etcd": []})
    assert (member / "server.crt").read_bytes() == before
    pki.ensure_etcd_pki(etcd_pki.root, {"etcd": ["10.0.0.5"]})  # a new SAN: re-issued
    assert (member / "server.crt").read_bytes() != before
