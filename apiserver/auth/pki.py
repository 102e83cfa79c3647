"""The cluster's PKI, kubeadm-style (with the `cryptography` package): one cluster CA; the
apiserver's serving certificate; a client certificate per identity (CN = user, O = groups); the
service-account signing key; and one kubeconfig per component.

    python -m apiserver.auth.pki --dir _output/local-up --server https://127.0.0.1:6443 --node node-1

writes, once, and reuses on later runs (a serving certificate is re-issued only when it lacks a
SAN now asked for, or is not signed by the CA on disk):

    DIR/pki/ca.crt ca.key                     the cluster CA (10 years)
    DIR/pki/apiserver.crt apiserver.key       serving certificate (SANs: localhost, 127.0.0.1, --san ...)
    DIR/pki/sa.key sa.pub                     service-account token signing key pair
    DIR/pki/encryption-config.yaml            the apiserver's --encryption-provider-config: Secrets under aescbc
                                              with a random key1 (0600; never regenerated)
    DIR/pki/admin.crt ...                     kubernetes-admin, O=system:masters
    DIR/pki/scheduler.crt ...                 system:kube-scheduler
    DIR/pki/controller-manager.crt ...        system:kube-controller-manager
    DIR/pki/kube-dns.crt ...                  system:kube-dns (the cluster DNS)
    DIR/pki/kube-proxy.crt ...                system:kube-proxy
    DIR/pki/metrics-server.crt ...            system:metrics-server (python -m metrics_server; also its client
                                              certificate towards kubelets, authorized for nodes/stats)
    DIR/pki/metrics-server-serving.crt .key   the metrics-server's serving certificate (localhost, 127.0.0.1,
                                              metrics-server: compose's service name)
    DIR/pki/road-server.crt ...               system:road-server (python -m road: read only)
    DIR/pki/road-server-serving.crt .key      the road server's serving certificate (localhost, 127.0.0.1,
                                              road-server)
    DIR/pki/front-proxy-client.crt .key       front-proxy-client: the apiserver's identity towards the
                                              metrics-server (--proxy-client-cert-file), from the cluster CA
                                              (kubeadm keeps a front-proxy CA apart)
    DIR/pki/kubelet-NODE.crt ...              system:node:NODE, O=system:nodes
    DIR/pki/apiserver-kubelet-client.crt .key kube-apiserver-kubelet-client, O=system:masters: the
                                              apiserver's identity towards kubelets (kubeadm's name)
    DIR/pki/kubelets/NODE/kubelet.crt .key    NODE's kubelet serving certificate (SANs: NODE, this host's
                                              name and default-route address, localhost, 127.0.0.1,
                                              --kubelet-san ...)
    DIR/admin.conf scheduler.conf controller-manager.conf kube-dns.conf kube-proxy.conf metrics-server.conf
                                              ingress-nginx.conf road-server.conf
                                              kubelet-NODE.conf
                                              (certificates embedded)

and, with `--etcd-member NAME[=HOST,...]` (repeatable), etcd's own PKI as kubeadm lays it out:

    DIR/pki/etcd/ca.crt ca.key                etcd's CA (etcd-ca), apart from the cluster CA: etcd trusts
                                              no certificate of the cluster's users, only its own
    DIR/pki/etcd/members/NAME/server.crt .key a member's serving certificate (CN NAME; SANs NAME, HOST...,
                                              localhost, 127.0.0.1; server and client usage, as the
                                              member's gRPC gateway dials the member with it)
    DIR/pki/etcd/members/NAME/peer.crt .key   its peer certificate (the same names), and ca.crt: the
                                              directory a member mounts as /etc/kubernetes/pki/etcd
    DIR/pki/apiserver-etcd-client.crt .key    kube-apiserver-etcd-client: the only client certificate
                                              (--etcd-certfile/--etcd-keyfile of the apiserver)

The kubelet serves HTTPS with its serving certificate and asks for client certificates from the
cluster CA: `python -m kubelet --tls-cert-file DIR/pki/kubelets/NODE/kubelet.crt
--tls-private-key-file DIR/pki/kubelets/NODE/kubelet.key --client-ca-file DIR/pki/ca.crt`; the
apiserver reaches it with `--kubelet-client-certificate DIR/pki/apiserver-kubelet-client.crt
--kubelet-client-key DIR/pki/apiserver-kubelet-client.key --kubelet-certificate-authority
DIR/pki/ca.crt`. `python -m apiserver.auth.pki kubelet-serving-cert --dir DIR --node NODE --san
HOST` issues one node's serving certificate for the addresses it will really have (a container's).

`python -m apiserver.auth.pki serving-cert --dir DIR --name NAME --san HOST` issues a serving
certificate from the same CA for something else (an admission webhook server).
Keys are ECDSA P-256: small, and cheap TLS handshakes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.storage.encryptionconfig import ensure_config as ensure_encryption_config
from machinery.kubeconfig import write_kubeconfig
from machinery.netutil import default_node_ip

CA_DAYS = 3650
LEAF_DAYS = 365

ADMIN_USER = "kubernetes-admin"
MASTERS_GROUP = "system:masters"
SCHEDULER_USER = "system:kube-scheduler"
PROXY_USER = "system:kube-proxy"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
KUBE_DNS_USER = "system:kube-dns"  # the cluster DNS (python -m dns), bound to system:kube-dns
NODES_GROUP = "system:nodes"
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
KUBELET_CLIENT = "apiserver-kubelet-client"  # file name under pki/


METRICS_SERVER_USER = "system:metrics-server"  # python -m metrics_server, bound to system:metrics-server
INGRESS_NGINX_USER = "system:ingress-nginx"  # python -m ingress_nginx, bound to ingress-nginx
ROAD_SERVER_USER = "system:road-server"  # python -m road, bound to system:road-server
FRONT_PROXY_CLIENT_USER = "front-proxy-client"  # the apiserver towards the metrics-server (requestheader)
ETCD_CA_NAME = "etcd-ca"
ETCD_CLIENT_USER = "kube-apiserver-etcd-client"
ETCD_CLIENT = "apiserver-etcd-client"  # file name under pki/


def node_user(node: str) -> str:
    return f"system:node:{node}"


PrivateKey = ec.EllipticCurvePrivateKey


# -- keys and certificates ------------------------------------------------------------------------


def new_key() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_pem(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _sans(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


@dataclass
class CA:
    cert: x509.Certificate
    key: PrivateKey

    @classmethod
    def create(cls, common_name: str = "minik8s-ca", days: int = CA_DAYS) -> CA:
        key = new_key()
        now = dt.datetime.now(dt.UTC)
        name = _name(common_name)
        cert = (x509.CertificateBuilder()
                .subject_name(name).issuer_name(name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + dt.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                             data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                             crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return cls(cert, key)

    @classmethod
    def load(cls, cert_file: Path, key_file: Path) -> CA:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_file}: expected an EC private key")
        return cls(cert, key)

    def issue(self, common_name: str, organizations: Iterable[str] = (), *, client: bool = True,
              server_hosts: Iterable[str] = (), days: int = LEAF_DAYS,
              key: PrivateKey | None = None) -> tuple[x509.Certificate, PrivateKey]:
        """A leaf certificate: client auth (CN = user, O = groups) and/or server auth for `server_hosts`."""
        key = key or new_key()
        hosts = list(server_hosts)
        usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + \
                 ([ExtendedKeyUsageOID.SERVER_AUTH] if hosts else [])
        now = dt.datetime.now(dt.UTC)
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(common_name, organizations))
                   .issuer_name(self.cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5))
                   .not_valid_after(now + dt.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                                content_commitment=False, data_encipherment=False,
                                                key_agreement=False, key_cert_sign=False, crl_sign=False,
                                                encipher_only=False, decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                                  critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _signed_by(cert: x509.Certificate, ca: CA) -> bool:
    try:
        cert.verify_directly_issued_by(ca.cert)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def _expires_soon(cert: x509.Certificate, days: int = 7) -> bool:
    return cert.not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(days=days)


# -- the layout ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """Paths of one cluster's PKI and kubeconfigs under `root`."""

    root: Path

    @property
    def dir(self) -> Path:
        return self.root / "pki"

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def encryption_config(self) -> Path:
        """The apiserver's --encryption-provider-config (its keys: only the apiserver reads it)."""
        return self.dir / "encryption-config.yaml"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def kubelet_client_cert(self) -> Path:
        return self.cert(KUBELET_CLIENT)

    @property
    def kubelet_client_key(self) -> Path:
        return self.key(KUBELET_CLIENT)

    def kubelet_serving_cert(self, node: str) -> Path:
        return self.cert(kubelet_serving_name(node))

    def kubelet_serving_key(self, node: str) -> Path:
        return self.key(kubelet_serving_name(node))

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def kubeconfig(self, name: str) -> Path:
        return self.root / f"{name}.conf"

    def load_ca(self) -> CA:
        return CA.load(self.ca_cert, self.ca_key)

    @property
    def etcd_ca_cert(self) -> Path:
        return self.dir / "etcd" / "ca.crt"

    @property
    def etcd_ca_key(self) -> Path:
        return self.dir / "etcd" / "ca.key"

    @property
    def etcd_client_cert(self) -> Path:
        return self.cert(ETCD_CLIENT)

    @property
    def etcd_client_key(self) -> Path:
        return self.key(ETCD_CLIENT)

    def etcd_member_dir(self, member: str) -> Path:
        """What member NAME mounts as kubeadm's /etc/kubernetes/pki/etcd: ca.crt, server.*, peer.*."""
        return self.dir / "etcd" / "members" / member


def ensure_ca(pki: Pki) -> tuple[CA, bool]:
    return _ensure_ca_at(pki.ca_cert, pki.ca_key, "minik8s-ca")


def _ensure_ca_at(cert_file: Path, key_file: Path, common_name: str) -> tuple[CA, bool]:
    if cert_file.is_file() and key_file.is_file():
        return CA.load(cert_file, key_file), False
    ca = CA.create(common_name)
    _write_private(key_file, key_pem(ca.key))
    _write_public(cert_file, cert_pem(ca.cert))
    return ca, True


def _cert_ok(path: Path, ca: CA, hosts: Iterable[str] = ()) -> bool:
    if not path.is_file():
        return False
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        return False
    if not _signed_by(cert, ca) or _expires_soon(cert):
        return False
    wanted = _sans(hosts)
    if not wanted:
        return True
    try:
        have = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return all(name in have for name in wanted)


def ensure_leaf(pki: Pki, ca: CA, name: str, common_name: str, organizations: Iterable[str] = (), *,
                client: bool = True, server_hosts: Iterable[str] = ()) -> bool:
    """Issue DIR/pki/NAME.crt/.key unless a valid one (same CA, SANs present) is there; True if issued."""
    hosts = list(server_hosts)
    cert_path, key_path = pki.cert(name), pki.key(name)
    if _cert_ok(cert_path, ca, hosts) and key_path.is_file():
        return False
    cert, key = ca.issue(common_name, organizations, client=client, server_hosts=hosts)
    _write_private(key_path, key_pem(key))
    _write_public(cert_path, cert_pem(cert))
    return True


def ensure_sa_keys(pki: Pki) -> bool:
    if pki.sa_key.is_file() and pki.sa_pub.is_file():
        return False
    key = new_key()
    _write_private(pki.sa_key, key_pem(key))
    _write_public(pki.sa_pub, public_pem(key))
    return True


def default_server_hosts() -> list[str]:
    hosts = ["localhost", "127.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local"]
    hostname = socket.gethostname()
    if hostname:
        hosts.append(hostname)
    return hosts


def kubelet_serving_name(node: str) -> str:
    """The file name (under pki/, without .crt/.key) of a node's kubelet serving certificate: a
    directory per node, as each kubelet keeps its own (no clash with the kubelet-NODE client files)."""
    return f"kubelets/{node}/kubelet"


def default_kubelet_hosts(node: str) -> list[str]:
    """Where the apiserver may find a kubelet on this host: the node name, the host's name, the
    address the kubelet reports as InternalIP by default (its default route's), and loopback."""
    return [node, socket.gethostname(), default_node_ip(), "localhost", "127.0.0.1"]


def ensure_kubelet_serving_cert(pki: Pki, ca: CA, node: str, hosts: Iterable[str] = ()) -> bool:
    """NODE's kubelet serving certificate (CN system:node:NODE, O system:nodes, server auth only,
    as a kubelet's certificate signing request asks); True if issued."""
    return ensure_leaf(pki, ca, kubelet_serving_name(node), node_user(node), (NODES_GROUP,), client=False,
                       server_hosts=[node, *hosts])


def _ensure_kubelet_certs(pki: Pki, ca: CA, nodes: Iterable[str], kubelet_hosts: Iterable[str] = ()) -> list[str]:
    said = []
    if ensure_leaf(pki, ca, KUBELET_CLIENT, KUBELET_CLIENT_USER, (MASTERS_GROUP,)):
        said.append("apiserver kubelet-client certificate")
    extra = list(kubelet_hosts)
    for node in nodes:
        if ensure_kubelet_serving_cert(pki, ca, node, [*default_kubelet_hosts(node), *extra]):
            said.append(f"kubelet serving certificate of {node}")
    return said


def ensure_kubelet_pki(root: str | os.PathLike[str], nodes: Iterable[str] = (),
                       kubelet_hosts: Iterable[str] = ()) -> Pki:
    """Only what apiserver→kubelet TLS needs (for a cluster whose apiserver is otherwise plain): the CA,
    the apiserver's kubelet-client certificate, each node's kubelet serving certificate."""
    pki = Pki(Path(root).resolve())
    ca, _ = ensure_ca(pki)
    _ensure_kubelet_certs(pki, ca, nodes, kubelet_hosts)
    return pki


# identity name -> (file name, CN, O)
def component_identities(nodes: Iterable[str] = ()) -> list[tuple[str, str, tuple[str, ...]]]:
    out = [
        ("admin", ADMIN_USER, (MASTERS_GROUP,)),
        ("scheduler", SCHEDULER_USER, ()),
        ("controller-manager", CONTROLLER_MANAGER_USER, ()),
        ("kube-dns", KUBE_DNS_USER, ()),
        ("kube-proxy", PROXY_USER, ()),
        ("metrics-server", METRICS_SERVER_USER, ()),
        ("ingress-nginx", INGRESS_NGINX_USER, ()),
        ("road-server", ROAD_SERVER_USER, ()),
    ]
    out += [(f"kubelet-{node}", node_user(node), (NODES_GROUP,)) for node in nodes]
    return out


def ensure_pki(root: str | os.PathLike[str], server: str = "https://127.0.0.1:6443", *,
               nodes: Iterable[str] = (), server_hosts: Iterable[str] = (), kubelet_hosts: Iterable[str] = (),
               log: bool = False) -> Pki:
    """Everything a cluster needs, generated on first call and reused after (see the module doc)."""
    pki = Pki(Path(root).resolve())
    ca, new_ca = ensure_ca(pki)
    said: list[str] = []
    if new_ca:
        said.append("ca")
    hosts = [*default_server_hosts(), *server_hosts]
    if ensure_leaf(pki, ca, "apiserver", "kube-apiserver", client=False, server_hosts=hosts):
        said.append("apiserver serving certificate")
    if ensure_sa_keys(pki):
        said.append("service-account key")
    if ensure_encryption_config(pki.encryption_config):
        said.append("encryption config (aescbc key for Secrets at rest)")
    if ensure_leaf(pki, ca, "front-proxy-client", FRONT_PROXY_CLIENT_USER):
        said.append("front-proxy client certificate")
    if ensure_leaf(pki, ca, "metrics-server-serving", "metrics-server", client=False,
                   server_hosts=[*default_server_hosts(), "metrics-server"]):  # compose's service name too
        said.append("metrics-server serving certificate")
    if ensure_leaf(pki, ca, "road-server-serving", "road-server", client=False,
                   server_hosts=[*default_server_hosts(), "road-server"]):
        said.append("road server serving certificate")
    nodes = list(nodes)
    said += _ensure_kubelet_certs(pki, ca, nodes, kubelet_hosts)
    for name, cn, orgs in component_identities(nodes):
        issued = ensure_leaf(pki, ca, name, cn, orgs)
        conf = pki.kubeconfig(name)
        if issued or new_ca or not conf.is_file() or _server_of(conf) != server:
            write_kubeconfig(conf, server, cn, ca_file=pki.ca_cert, cert_file=pki.cert(name),
                             key_file=pki.key(name), embed=True, cluster="minik8s",
                             context=f"{cn}@minik8s" if name != "admin" else "kubernetes-admin@minik8s")
            said.append(conf.name)
    if log:
        print(f"pki: {pki.root}: " + (f"wrote {', '.join(said)}" if said else "reused everything"),
              file=sys.stderr)
    return pki


def ensure_etcd_pki(root: str | os.PathLike[str], members: Mapping[str, Iterable[str]], *, log: bool = False) -> Pki:
    """etcd's CA, each member's serving and peer certificates, the apiserver's etcd client certificate
    (see the module doc); generated on first call and reused after, re-issued when a SAN is missing."""
    pki = Pki(Path(root).resolve())
    ca, new_ca = _ensure_ca_at(pki.etcd_ca_cert, pki.etcd_ca_key, ETCD_CA_NAME)
    said = ["etcd ca"] if new_ca else []
    if ensure_leaf(pki, ca, ETCD_CLIENT, ETCD_CLIENT_USER):
        said.append("apiserver etcd-client certificate")
    for member, hosts in members.items():
        names = [member, *hosts, "localhost", "127.0.0.1"]
        where = pki.etcd_member_dir(member).relative_to(pki.dir)
        for kind in ("server", "peer"):  # both usages: a peer is a client of the others, the gateway of itself
            if ensure_leaf(pki, ca, f"{where}/{kind}", member, client=True, server_hosts=names):
                said.append(f"etcd {kind} certificate of {member}")
        ca_copy = pki.etcd_member_dir(member) / "ca.crt"
        if not ca_copy.is_file() or ca_copy.read_bytes() != pki.etcd_ca_cert.read_bytes():
            _write_public(ca_copy, pki.etcd_ca_cert.read_bytes())
    if log:
        print(f"pki: {pki.root}: etcd: " + (f"wrote {', '.join(said)}" if said else "reused everything"),
              file=sys.stderr)
    return pki


def parse_etcd_member(text: str) -> tuple[str, list[str]]:
    """`NAME` or `NAME=HOST,HOST`: a member and the names it is reached by."""
    name, _, hosts = text.partition("=")
    if not name:
        raise ValueError(f"--etcd-member {text!r}: want NAME or NAME=HOST[,HOST...]")
    return name, [h for h in hosts.split(",") if h]


def _server_of(conf: Path) -> str | None:
    import yaml

    try:
        doc = yaml.safe_load(conf.read_text())
        return str(doc["clusters"][0]["cluster"]["server"])
    except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return None


def issue_serving_cert(root: str | os.PathLike[str], name: str, hosts: Iterable[str]) -> tuple[Path, Path]:
    """A serving certificate from the cluster CA for another server (a webhook): DIR/pki/NAME.crt/.key."""
    pki = Pki(Path(root).resolve())
    ca, _ = ensure_ca(pki)
    ensure_leaf(pki, ca, name, name, client=False, server_hosts=list(hosts))
    return pki.cert(name), pki.key(name)


def issue_client_cert(root: str | os.PathLike[str], name: str, user: str,
                      groups: Iterable[str] = ()) -> tuple[Path, Path]:
    """A client certificate from the cluster CA: DIR/pki/NAME.crt/.key for `user` in `groups`."""
    pki = Pki(Path(root).resolve())
    ca, _ = ensure_ca(pki)
    cert, key = ca.issue(user, groups)
    _write_private(pki.key(name), key_pem(key))
    _write_public(pki.cert(name), cert_pem(cert))
    return pki.cert(name), pki.key(name)


def issue_kubelet_serving_cert(root: str | os.PathLike[str], node: str, hosts: Iterable[str]) -> tuple[Path, Path]:
    """NODE's kubelet serving certificate for exactly these hosts (and the node name)."""
    pki = Pki(Path(root).resolve())
    ca, _ = ensure_ca(pki)
    ensure_kubelet_serving_cert(pki, ca, node, hosts)
    return pki.kubelet_serving_cert(node), pki.kubelet_serving_key(node)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "kubelet-serving-cert":
        p = argparse.ArgumentParser(prog="python -m apiserver.auth.pki kubelet-serving-cert",
                                    description="issue a kubelet's serving certificate from the cluster CA")
        p.add_argument("--dir", required=True, help="the PKI root (holds pki/ca.crt)")
        p.add_argument("--node", required=True, help="the node name (CN system:node:NODE, and a SAN)")
        p.add_argument("--san", action="append", default=[],
                       help="host name or IP the apiserver reaches the kubelet at (repeatable)")
        args = p.parse_args(argv[1:])
        cert, key = issue_kubelet_serving_cert(args.dir, args.node, args.san or ["127.0.0.1", "localhost"])
        print(f"{cert}\n{key}")
        return 0
    if argv and argv[0] == "serving-cert":
        p = argparse.ArgumentParser(prog="python -m apiserver.auth.pki serving-cert",
                                    description="issue a serving certificate from the cluster CA")
        p.add_argument("--dir", required=True, help="the PKI root (holds pki/ca.crt)")
        p.add_argument("--name", required=True, help="file name and CN of the certificate")
        p.add_argument("--san", action="append", default=[], help="host name or IP (repeatable)")
        args = p.parse_args(argv[1:])
        cert, key = issue_serving_cert(args.dir, args.name, args.san or ["127.0.0.1", "localhost"])
        print(f"{cert}\n{key}")
        return 0
    p = argparse.ArgumentParser(prog="python -m apiserver.auth.pki",
                                description="generate (once) the cluster CA, certificates and kubeconfigs")
    p.add_argument("--dir", required=True, help="where pki/ and the *.conf kubeconfigs go")
    p.add_argument("--server", default="https://127.0.0.1:6443", help="apiserver URL the kubeconfigs name")
    p.add_argument("--node", action="append", default=[], help="a kubelet's node name (repeatable)")
    p.add_argument("--san", action="append", default=[], help="extra SAN of the apiserver's certificate")
    p.add_argument("--kubelet-san", action="append", default=[],
                   help="extra SAN of every --node's kubelet serving certificate (repeatable)")
    p.add_argument("--etcd-member", action="append", default=[], metavar="NAME[=HOST,...]",
                   help="an etcd member: its serving and peer certificates, for NAME and HOSTs (repeatable); "
                        "with the first, etcd's CA and the apiserver's etcd client certificate")
    args = p.parse_args(argv)
    try:
        members = dict(parse_etcd_member(m) for m in args.etcd_member)
    except ValueError as e:
        p.error(str(e))
    ensure_pki(args.dir, args.server, nodes=args.node, server_hosts=args.san, kubelet_hosts=args.kubelet_san,
               log=True)
    if members:
        ensure_etcd_pki(args.dir, members, log=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
