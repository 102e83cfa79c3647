"""`mkubectl create job|cronjob` (kubectl's create_job.go, create_cronjob.go) and
`mkubectl create service clusterip|nodeport|loadbalancer|externalname NAME --tcp=PORT[:TARGET]`, as
kubectl's create_service.go: the Service is labelled and selects `app=NAME`, each `--tcp` spec is a
TCP port named after the spec (`80:8080` → `80-8080`), `--node-port` goes on every port, and
`--clusterip=None` makes a headless Service (ClusterIP type only).

`--dry-run=client` prints the object without a request; `server` POSTs it with `dryRun=All`; the
server's refusal reads as kubectl's: `error: failed to create ClusterIP service: <message>`.
"""

from __future__ import annotations

import argparse
from typing import Any

from kubectl.context import Context
from kubectl.errors import CommandError, status_message
from kubectl.flags import atoi, dry_run, parse_port
from kubectl.printers import check_mutation_output, print_mutation
from machinery.api.resources import resource_for
from machinery.client import ApiError
from machinery.types import Obj
from machinery.validation import is_dns1123_subdomain, is_valid_port_name, is_valid_port_num

SERVICES = resource_for("", "services")
JOBS = resource_for("batch", "jobs")
CRONJOBS = resource_for("batch", "cronjobs")
FIELD_MANAGER = "kubectl-create"
SERVICE_TYPES = {"clusterip": "ClusterIP", "nodeport": "NodePort", "loadbalancer": "LoadBalancer",
                 "externalname": "ExternalName"}
_HELP = {
    "clusterip": "create a ClusterIP service",
    "nodeport": "create a NodePort service",
    "loadbalancer": "create a LoadBalancer service",
    "externalname": "create an ExternalName service",
}


def _creation_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", nargs="?", const="client", default="none", help="none, client or server")
    p.add_argument("-o", "--output", default="", help="yaml, json or name")
    p.add_argument("--field-manager", default=FIELD_MANAGER, help="the manager name recorded for this create")
    p.add_argument("--validate", nargs="?", const="strict", default="strict",
                   help="strict (default), warn, ignore: how the server treats unknown or duplicate fields")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("create", parents=[common], help="create a resource (service) from the command line")
    kinds = p.add_subparsers(dest="create_kind", metavar="SUBCOMMAND", parser_class=type(p))
    service = kinds.add_parser("service", aliases=["svc"], parents=[common], help="create a service")
    types = service.add_subparsers(dest="service_type", metavar="TYPE", parser_class=type(p))
    for name, text in _HELP.items():
        t = types.add_parser(name, parents=[common], help=text)
        t.add_argument("names", nargs="*", metavar="NAME")
        t.add_argument("--tcp", action="append", default=[], help="PORT[:TARGET_PORT], repeated or comma-separated")
        if name == "clusterip":
            t.add_argument("--clusterip", default="",
                           help="assign your own ClusterIP or set to 'None' for a 'headless' service")
        if name == "nodeport":
            t.add_argument("--node-port", type=int, default=0, help="port used to expose the service on each node")
        if name == "externalname":
            t.add_argument("--external-name", default=None, help="external name of the service")
        _creation_flags(t)
        t.set_defaults(run=run, service_type_name=SERVICE_TYPES[name])
    job = kinds.add_parser("job", parents=[common], help="create a job with the specified name")
    job.add_argument("names", nargs="*", metavar="NAME [-- COMMAND [args...]]")
    job.add_argument("--image", default="", help="image name to run")
    job.add_argument("--from", dest="from_", default="", help="the name of the resource to create a Job from "
                                                              "(only cronjob is supported)")
    _creation_flags(job)
    job.set_defaults(run=run_job, command_args=[])  # the CLI puts what follows `--` there
    cronjob = kinds.add_parser("cronjob", aliases=["cj"], parents=[common],
                               help="create a cron job with the specified name")
    cronjob.add_argument("names", nargs="*", metavar="NAME [-- COMMAND [args...]]")
    cronjob.add_argument("--image", default="", help="image name to run")
    cronjob.add_argument("--schedule", default="", help="a schedule in the Cron format the job should be run with")
    cronjob.add_argument("--restart", default="OnFailure", help="job's restart policy. supported values: OnFailure, "
                                                                "Never")
    _creation_flags(cronjob)
    cronjob.set_defaults(run=run_cronjob, command_args=[])


def parse_ports(spec: str) -> tuple[int, int | str]:
    """create_service.go parsePorts: `port[:targetPort]`, the target a number or a port name."""
    parts = spec.split(":")
    try:
        port = parse_port(parts[0])
    except ValueError as e:
        raise CommandError(str(e)) from None
    if len(parts) == 1:
        return port, port
    target = parts[1]
    try:
        number: int | None = atoi(target)
    except ValueError:
        number = None
    if number is None:
        errors = is_valid_port_name(target)
        if errors:
            raise CommandError(",".join(errors))
        return port, target
    errors = is_valid_port_num(number)
    if errors:
        raise CommandError(",".join(errors))
    return port, number


def tcp_specs(values: list[str]) -> list[str]:
    """pflag's StringSlice: every occurrence, each split on commas."""
    return [part for value in values for part in value.split(",") if part != ""]


def validate(service_type: str, tcp: list[str], cluster_ip: str, external_name: str) -> None:
    """ServiceOptions.Validate."""
    if cluster_ip == "None" and service_type != "ClusterIP":
        raise CommandError("ClusterIP=None can only be used with ClusterIP service type")
    if cluster_ip != "None" and not tcp and service_type != "ExternalName":
        raise CommandError("at least one tcp port specifier must be provided")
    if service_type == "ExternalName" and is_dns1123_subdomain(external_name):
        raise CommandError(f"invalid service external name {external_name}")


def service_from_options(name: str, service_type: str, tcp: list[str], *, cluster_ip: str = "", node_port: int = 0,
                         external_name: str = "", namespace: str = "") -> Obj:
    """ServiceOptions.createService, with the fields Go's encoder writes for an object not yet stored
    (`creationTimestamp: null`, `status.loadBalancer: {}`), so a client dry run prints what kubectl prints."""
    ports: list[Obj] = []
    for spec in tcp:
        port, target = parse_ports(spec)
        entry: Obj = {"name": spec.replace(":", "-"), "port": port, "protocol": "TCP", "targetPort": target}
        if node_port:
            entry["nodePort"] = node_port
        ports.append(entry)
    metadata: Obj = {"creationTimestamp": None, "labels": {"app": name}, "name": name}
    if namespace:
        metadata["namespace"] = namespace
    spec_: Obj = {"selector": {"app": name}, "type": service_type}
    if ports:
        spec_["ports"] = ports
    if external_name:
        spec_["externalName"] = external_name
    if cluster_ip:
        spec_["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec_,
            "status": {"loadBalancer": {}}}


def creation_params(args: argparse.Namespace, strategy: str) -> dict[str, str]:
    """metav1.CreateOptions as kubectl sends them: field manager, field validation, dryRun=All."""
    validation = {"strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore"}
    params = {"fieldManager": args.field_manager or FIELD_MANAGER,
              "fieldValidation": validation.get(str(args.validate).lower(), "Strict")}
    if strategy == "server":
        params["dryRun"] = "All"
    return params


async def run(ctx: Context, args: argparse.Namespace) -> int:
    assert SERVICES is not None
    service_type: str = args.service_type_name
    if service_type == "ExternalName" and args.external_name is None:
        raise CommandError('required flag(s) "external-name" not set')
    if len(args.names) != 1:
        raise CommandError(f"exactly one NAME is required, got {len(args.names)}")
    strategy = dry_run(args.dry_run)
    try:
        check_mutation_output(args.output)
    except ValueError as e:
        raise CommandError(str(e)) from None
    tcp = tcp_specs(args.tcp)
    cluster_ip = getattr(args, "clusterip", "")
    external_name = getattr(args, "external_name", None) or ""
    validate(service_type, tcp, cluster_ip, external_name)
    name = args.names[0]
    service = service_from_options(name, service_type, tcp, cluster_ip=cluster_ip,
                                   node_port=getattr(args, "node_port", 0), external_name=external_name,
                                   namespace=ctx.namespace if ctx.explicit_namespace else "")
    if strategy != "client":
        try:
            service = await ctx.client.request("POST", SERVICES.collection_path(ctx.namespace),
                                               params=creation_params(args, strategy), body=service)
        except ApiError as e:
            # kubectl: fmt.Errorf("failed to create %s service: %v", type, err); a StatusError's text is its message
            message = e.status.message or status_message(e.status, e.code)
            raise CommandError(f"failed to create {service_type} service: {message}") from None
    print_mutation(ctx.out, SERVICES, service, args.output, "created", strategy)
    return 0


# -- jobs and cron jobs -------------------------------------------------------------------------


def job_from_image(name: str, image: str, command: list[str], namespace: str = "") -> Obj:
    """CreateJobOptions.createJob: one container named after the Job, restartPolicy Never."""
    container: Obj = {"name": name, "image": image, "resources": {}}
    if command:
        container["command"] = command
    metadata: Obj = {"creationTimestamp": None, "name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"template": {"metadata": {"creationTimestamp": None},
                                  "spec": {"containers": [container], "restartPolicy": "Never"}}},
            "status": {}}


def job_from_cronjob(name: str, cronjob: Obj, namespace: str = "") -> Obj:
    """CreateJobOptions.createJobFromCronJob: the jobTemplate's labels, annotations and spec, the
    `cronjob.kubernetes.io/instantiate: manual` annotation, owned by the CronJob."""
    template = cronjob.get("spec", {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    annotations = {"cronjob.kubernetes.io/instantiate": "manual", **(tmeta.get("annotations") or {})}
    meta = cronjob.get("metadata") or {}
    metadata: Obj = {"annotations": annotations, "creationTimestamp": None, "name": name,
                     "ownerReferences": [{"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True,
                                          "kind": "CronJob", "name": meta.get("name"), "uid": meta.get("uid")}]}
    if tmeta.get("labels"):
        metadata["labels"] = tmeta["labels"]
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": template.get("spec") or {},
            "status": {}}


def cronjob_from_options(name: str, image: str, schedule: str, restart: str, command: list[str],
                         namespace: str = "") -> Obj:
    """CreateCronJobOptions.createCronJob."""
    container: Obj = {"name": name, "image": image, "resources": {}}
    if command:
        container["command"] = command
    metadata: Obj = {"creationTimestamp": None, "name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata,
            "spec": {"schedule": schedule, "jobTemplate": {
                "metadata": {"creationTimestamp": None, "name": name},
                "spec": {"template": {"metadata": {"creationTimestamp": None},
                                      "spec": {"containers": [container], "restartPolicy": restart}}}}},
            "status": {}}


def _name_and_command(args: argparse.Namespace) -> tuple[str, list[str]]:
    names: list[str] = list(args.names)
    if not names:
        raise CommandError("NAME is required")
    return names[0], [*names[1:], *args.command_args]


async def _post(ctx: Context, args: argparse.Namespace, info: Any, body: Obj, strategy: str) -> Obj:
    if strategy == "client":
        return body
    try:
        created: Obj = await ctx.client.request("POST", info.collection_path(ctx.namespace),
                                                params=creation_params(args, strategy), body=body)
    except ApiError as e:
        # kubectl: fmt.Errorf("failed to create job: %v", err) (and "cronjob")
        message = e.status.message or status_message(e.status, e.code)
        raise CommandError(f"failed to create {info.singular}: {message}") from None
    return created


async def run_job(ctx: Context, args: argparse.Namespace) -> int:
    assert JOBS is not None and CRONJOBS is not None
    name, command = _name_and_command(args)
    image, source = args.image, args.from_
    if not image and not source:
        raise CommandError("either --image or --from must be specified")
    if image and source:
        raise CommandError("--image and --from are mutually exclusive")
    if command and source:
        raise CommandError("cannot specify --from and command")
    strategy = dry_run(args.dry_run)
    namespace = ctx.namespace if ctx.explicit_namespace else ""
    if source:
        kind, _, source_name = source.partition("/")
        if kind not in ("cronjob", "cronjobs", "cj", "cronjob.batch", "cronjobs.batch") or not source_name:
            raise CommandError(f"from must be of type cronjob, got {source!r}")
        try:
            cronjob = await ctx.client.request("GET", CRONJOBS.object_path(source_name, ctx.namespace))
        except ApiError as e:
            raise CommandError(e.status.message or status_message(e.status, e.code)) from None
        body = job_from_cronjob(name, cronjob, namespace)
    else:
        body = job_from_image(name, image, command, namespace)
    job = await _post(ctx, args, JOBS, body, strategy)
    print_mutation(ctx.out, JOBS, job, args.output, "created", strategy)
    return 0


async def run_cronjob(ctx: Context, args: argparse.Namespace) -> int:
    assert CRONJOBS is not None
    name, command = _name_and_command(args)
    if not args.image:
        raise CommandError("--image must be specified")
    if not args.schedule:
        raise CommandError("--schedule must be specified")
    if args.restart not in ("OnFailure", "Never"):
        raise CommandError(f"restart policy must be one of [OnFailure Never], got {args.restart!r}")
    strategy = dry_run(args.dry_run)
    body = cronjob_from_options(name, args.image, args.schedule, args.restart, command,
                                ctx.namespace if ctx.explicit_namespace else "")
    cronjob = await _post(ctx, args, CRONJOBS, body, strategy)
    print_mutation(ctx.out, CRONJOBS, cronjob, args.output, "created", strategy)
    return 0
