"""nginx.conf from a Configuration (upstream rootfs/etc/nginx/template/nginx.tmpl, without Lua: upstreams are
nginx `upstream` blocks, so an endpoint change is a graceful reload, as ingress-nginx did before its dynamic
balancer). The catch-all server `_` answers what no host claims; a path nobody routes gets the default
backend's 404 ("default backend - 404"); a backend without ready endpoints 503. Hosts with TLS are served on
the HTTPS port with their Secret's certificate by SNI (else the fallback certificate) and redirect plain
HTTP there with 308 (ingress-nginx's ssl-redirect)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingress_nginx.model import DEFAULT_SERVER, Configuration, Location, Server

DEFAULT_BACKEND_BODY = "default backend - 404"


@dataclass(frozen=True)
class Settings:
    run_dir: str  # pid, logs, temp dirs, certificates
    http_port: int
    https_port: int
    bind_address: str = "0.0.0.0"
    fallback_certificate: str = ""  # a PEM file (certificate and key)
    access_log: bool = True
    worker_processes: int = 1


def certificate_path(run_dir: str, key: str) -> str:
    return f"{run_dir}/ssl/{key.replace('/', '-')}.pem"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _server_name(hostname: str) -> str:
    if hostname == DEFAULT_SERVER:
        return DEFAULT_SERVER
    if hostname.startswith("*."):  # one label, as the Ingress spec says (nginx's own wildcard takes several)
        return "~^[^.]+" + re.escape(hostname[1:]) + "$"
    return hostname


def _location(location: Location, indent: str = "        ") -> list[str]:
    head = f"location = {location.path}" if location.exact else f"location {location.path}"
    lines = [f"{indent}{head} {{  # {location.ingress}"]
    if location.snippet:
        lines += [f"{indent}    {line}" for line in location.snippet.splitlines()]
    if location.upstream is None:
        lines.append(f"{indent}    return 503;")
    else:
        lines.append(f"{indent}    proxy_pass http://{location.upstream};")
    return [*lines, f"{indent}}}"]


def _server(server: Server, s: Settings) -> list[str]:
    default = server.hostname == DEFAULT_SERVER
    flag = " default_server" if default else ""
    lines = ["    server {", f"        server_name {_server_name(server.hostname)};",
             f"        listen {s.bind_address}:{s.http_port}{flag};"]
    if server.tls or default:
        cert = certificate_path(s.run_dir, server.certificate) if server.certificate else s.fallback_certificate
        lines += [f"        listen {s.bind_address}:{s.https_port} ssl{flag};",
                  f"        ssl_certificate {cert};", f"        ssl_certificate_key {cert};"]
    if server.tls:
        port = "" if s.https_port == 443 else f":{s.https_port}"
        lines += ["        if ($scheme = http) {", f"            return 308 https://$host{port}$request_uri;",
                  "        }"]
    for key in sorted(server.locations, key=lambda k: (k[1], k[0])):
        lines += _location(server.locations[key])
    if (False, "/") not in server.locations:
        if server.default is not None:
            lines += _location(server.default)
        else:
            lines += ["        location / {  # the default backend",
                      f"            return 404 {_quote(DEFAULT_BACKEND_BODY)};", "        }"]
    return [*lines, "    }"]


def render(config: Configuration, s: Settings) -> str:
    run = s.run_dir
    lines = [
        "# rendered by ingress_nginx: do not edit",
        f"worker_processes {s.worker_processes};",
        "worker_shutdown_timeout 10s;",  # old workers of a reload or a stop never wait longer on connections
        f"pid {run}/nginx.pid;",
        f"error_log {run}/logs/error.log notice;",
        "events {", "    worker_connections 4096;", "}",
        "http {",
        "    default_type text/plain;",
        f"    access_log {run}/logs/access.log;" if s.access_log else "    access_log off;",
        f"    client_body_temp_path {run}/tmp/client_body;",
        f"    proxy_temp_path {run}/tmp/proxy;",
        f"    fastcgi_temp_path {run}/tmp/fastcgi;",
        f"    uwsgi_temp_path {run}/tmp/uwsgi;",
        f"    scgi_temp_path {run}/tmp/scgi;",
        "    server_names_hash_bucket_size 128;",
        "    server_tokens off;",
        "    keepalive_timeout 75s;",
        "    proxy_http_version 1.1;",
        '    proxy_set_header Connection "";',
        "    proxy_set_header Host $host;",
        "    proxy_set_header X-Request-ID $request_id;",
        "    proxy_set_header X-Real-IP $remote_addr;",
        "    proxy_set_header X-Forwarded-For $remote_addr;",
        "    proxy_set_header X-Forwarded-Host $host;",
        "    proxy_set_header X-Forwarded-Proto $scheme;",
        "    proxy_connect_timeout 5s;",
        "    proxy_next_upstream error timeout;",
        "    proxy_next_upstream_tries 3;",
        "    ssl_protocols TLSv1.2 TLSv1.3;",
    ]
    for name in sorted(config.upstreams):
        lines.append(f"    upstream {name} {{")
        lines += [f"        server {address}:{port} max_fails=0;"
                  if ":" not in address else f"        server [{address}]:{port} max_fails=0;"
                  for address, port in config.upstreams[name].endpoints]
        lines += ["        keepalive 32;", "    }"]
    servers = config.servers
    for hostname in [DEFAULT_SERVER, *sorted(h for h in servers if h != DEFAULT_SERVER)]:
        if hostname in servers:
            lines += _server(servers[hostname], s)
    return "\n".join([*lines, "}", ""])
