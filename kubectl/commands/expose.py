"""`mkubectl expose (-f FILE | TYPE NAME | TYPE/NAME) [--port=P] [--target-port=T] [--type=T] [--name=N]
[--protocol=P] [--selector=k=v] [--labels=k=v] [--cluster-ip=IP|None] [--session-affinity=ClientIP]
[--external-ip=IP] [--load-balancer-ip=IP]`, as kubectl's expose.go.

The object is read from the server (a file names it; its content is the server's); it must be a Pod,
Service, ReplicationController, Deployment or ReplicaSet. What the flags leave out comes from it
(kubectl's polymorphichelpers): the selector, the ports (several get the names `port-1`, `port-2`...),
each port's protocols, the labels, and the name (cut to 63 characters). The target port is the
`--target-port` for every port, else each port itself. The Service is POSTed as fieldManager
kubectl-expose and reported as `service/NAME exposed`.
"""

from __future__ import annotations

import argparse
from typing import Any

from kubectl.commands.create import creation_params
from kubectl.context import Context
from kubectl.errors import CommandError, format_error, with_source
from kubectl.flags import atoi, dry_run
from kubectl.manifests import load
from kubectl.polymorphichelpers import (
    can_be_exposed,
    make_labels,
    map_based_selector_for_object,
    ports_for_object,
    protocols_for_object,
)
from kubectl.printers import check_mutation_output, print_mutation
from kubectl.resources import Target, targets_from_args
from machinery.api.resources import ResourceInfo, resource_for
from machinery.client import ApiError
from machinery.types import Obj

SERVICES = resource_for("", "services")
FIELD_MANAGER = "kubectl-expose"
DNS1035_LABEL_MAX_LENGTH = 63


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("expose", parents=[common], help="take a replication controller, service, deployment or "
                       "pod and expose it as a new Kubernetes service")
    p.add_argument("resources", nargs="*", metavar="TYPE NAME | TYPE/NAME")
    p.add_argument("-f", "--filename", action="append", default=[], help="a file naming the object to expose")
    p.add_argument("-R", "--recursive", action="store_true")
    p.add_argument("--port", default="", help="the port that the service should serve on")
    p.add_argument("--protocol", default="", help="the network protocol for the service (TCP, UDP or SCTP)")
    p.add_argument("--target-port", default="", help="name or number of the port on the container")
    p.add_argument("--type", default="", help="ClusterIP, NodePort, LoadBalancer or ExternalName")
    p.add_argument("--name", default="", help="the name for the newly created object")
    p.add_argument("--selector", default="", help="label selector (k=v,...) instead of the object's")
    p.add_argument("-l", "--labels", default="", help="labels for the service (k=v,...)")
    p.add_argument("--cluster-ip", default="", help="ClusterIP to be assigned to the service; None: headless")
    p.add_argument("--external-ip", default="", help="additional external IP address for the service")
    p.add_argument("--load-balancer-ip", default="", help="IP for a LoadBalancer service")
    p.add_argument("--session-affinity", default="", help="None or ClientIP")
    p.add_argument("--dry-run", nargs="?", const="client", default="none", help="none, client or server")
    p.add_argument("-o", "--output", default="", help="yaml, json or name")
    p.add_argument("--field-manager", default=FIELD_MANAGER)
    p.add_argument("--validate", nargs="?", const="strict", default="strict")
    p.set_defaults(run=run)


def parse_labels(spec: str) -> dict[str, str]:
    """expose.go parseLabels: `k=v,k2=v2`, equality only."""
    labels: dict[str, str] = {}
    for part in spec.split(","):
        pair = part.split("=")
        if len(pair) != 2:
            raise CommandError(f"unexpected label spec: {part}")
        if not pair[0]:
            raise CommandError("unexpected empty label key")
        labels[pair[0]] = pair[1]
    return labels


def exposed_service(*, name: str, selector: str, ports: list[str], protocols: dict[str, list[str]],
                    protocol: str = "", target_port: str = "", labels: str = "", service_type: str = "",
                    cluster_ip: str = "", external_ip: str = "", load_balancer_ip: str = "",
                    session_affinity: str = "", namespace: str = "") -> Obj:
    """ExposeServiceOptions.createService, with Go's encoding of a new object (`creationTimestamp: null`,
    `status.loadBalancer: {}`)."""
    if not selector:
        raise CommandError("selector must be specified")
    if not name:
        raise CommandError("name must be specified")
    service_ports: list[Obj] = []
    for i, text in enumerate(ports):
        text = text.strip()
        try:
            number = atoi(text)
        except ValueError as e:
            raise CommandError(str(e)) from None
        port_name = f"port-{i + 1}" if len(ports) > 1 else ""
        chosen = protocol
        if not chosen:
            chosen = "TCP"
            found = protocols.get(text)
            if found and len(found) > 1:
                # one port, several protocols: one ServicePort each, named after the protocol
                service_ports.extend({"name": f"port-{i + 1}-{p.lower()}", "port": number, "protocol": p}
                                     for p in found)
                continue
            if found:
                chosen = found[0]
        entry: Obj = {"port": number, "protocol": chosen}
        if port_name:
            entry["name"] = port_name
        service_ports.append(entry)
    for entry in service_ports:
        if target_port:  # the same target port for every port; a number stays a number
            try:
                entry["targetPort"] = atoi(target_port)
            except ValueError:
                entry["targetPort"] = target_port
        else:
            entry["targetPort"] = entry["port"]
    metadata: Obj = {"creationTimestamp": None, "name": name}
    if labels:
        metadata["labels"] = parse_labels(labels)
    if namespace:
        metadata["namespace"] = namespace
    spec: Obj = {"selector": parse_labels(selector)}
    if service_ports:
        spec["ports"] = service_ports
    if external_ip:
        spec["externalIPs"] = [external_ip]
    if service_type:
        spec["type"] = service_type
    if service_type == "LoadBalancer" and load_balancer_ip:
        spec["loadBalancerIP"] = load_balancer_ip
    if session_affinity:
        if session_affinity not in ("ClientIP", "None"):
            raise CommandError(f"unknown session affinity: {session_affinity}")
        spec["sessionAffinity"] = session_affinity
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec,
            "status": {"loadBalancer": {}}}


def service_for_object(info: ResourceInfo, obj: Obj, args: argparse.Namespace, namespace: str) -> Obj:
    """RunExpose's per-object part: what the flags leave out, taken from the object."""
    try:
        can_be_exposed(info.group, info.kind)
    except ValueError as e:
        raise CommandError(str(e)) from None
    meta = obj.get("metadata") or {}
    selector = args.selector
    if not selector:
        try:
            selector = map_based_selector_for_object(info.group, info.kind, obj)
        except ValueError as e:
            raise CommandError(f"couldn't retrieve selectors via --selector flag or introspection: {e}") from None
    ports = [p for p in args.port.split(",")] if args.port else []
    if not ports:
        try:
            found = ports_for_object(info.group, info.kind, obj)
        except ValueError as e:
            raise CommandError(f"couldn't find port via --port flag or introspection: {e}") from None
        if not found and args.cluster_ip != "None":  # a headless Service may have no port
            raise CommandError("couldn't find port via --port flag or introspection")
        ports = found
    protocols = protocols_for_object(info.group, info.kind, obj)
    labels = args.labels or make_labels(meta.get("labels") or {})
    name = args.name or str(meta.get("name") or "")[:DNS1035_LABEL_MAX_LENGTH]
    return exposed_service(name=name, selector=selector, ports=ports, protocols=protocols, protocol=args.protocol,
                           target_port=args.target_port, labels=labels, service_type=args.type,
                           cluster_ip=args.cluster_ip, external_ip=args.external_ip,
                           load_balancer_ip=args.load_balancer_ip, session_affinity=args.session_affinity,
                           namespace=namespace)


async def _objects(ctx: Context, args: argparse.Namespace) -> list[tuple[ResourceInfo, Obj, str]]:
    """(resource, the object as stored, the manifest it came from or "")."""
    pairs: list[tuple[ResourceInfo, str, str]] = []
    if args.filename:
        for manifest in load(args.filename, recursive=args.recursive):
            info = await ctx.resolver.for_object(manifest.obj)
            if info is None:
                raise CommandError(f'unable to recognize "{manifest.source}": no matches for kind '
                                   f'"{manifest.obj.get("kind")}" in version "{manifest.obj.get("apiVersion")}"')
            pairs.append((info, str((manifest.obj.get("metadata") or {}).get("name") or ""), manifest.source))
    else:
        if not args.resources:
            raise CommandError("You must provide one or more resources by argument or filename.\n"
                               "Example resource specifications include:\n   '-f rsrc.yaml'\n"
                               "   '--filename=rsrc.json'\n   '<resource> <name>'\n   '<resource>'")
        targets: list[Target] = await targets_from_args(ctx.resolver, args.resources)
        for target in targets:
            if not target.names:
                raise CommandError("resource(s) were provided, but no name was specified")
            pairs.extend((target.info, name, "") for name in target.names)
    out = []
    for info, name, source in pairs:
        try:
            obj = await ctx.client.request("GET", info.object_path(name, ctx.ns_for(info)))
        except ApiError as e:
            raise with_source(e, "retrieving current configuration of", source) from None
        out.append((info, obj, source))
    return out


async def run(ctx: Context, args: argparse.Namespace) -> int:
    assert SERVICES is not None
    strategy = dry_run(args.dry_run)
    try:
        check_mutation_output(args.output)
    except ValueError as e:
        raise CommandError(str(e)) from None
    failures: list[BaseException] = []
    for info, obj, source in await _objects(ctx, args):
        # as kubectl: an object that cannot be exposed is reported at the end, the others still are
        try:
            service = service_for_object(info, obj, args, ctx.namespace if ctx.explicit_namespace else "")
            if strategy != "client":
                try:
                    service = await ctx.client.request("POST", SERVICES.collection_path(ctx.namespace),
                                                       params=creation_params(args, strategy), body=service)
                except ApiError as e:
                    raise with_source(e, "creating", source) from None
        except (ApiError, CommandError) as e:
            failures.append(e)
            continue
        print_mutation(ctx.out, SERVICES, service, args.output, "exposed", strategy)
    if len(failures) == 1:
        raise failures[0]
    for failure in failures:
        ctx.warn(format_error(failure, ctx.client.server))
    return 1 if failures else 0
