"""The Website operator: a small kopf operator (https://kopf.readthedocs.io) that serves a `Website`
(example.minik8s.io/v1, crd.yaml) with a Deployment and a Service it owns, as upstream's sample-controller
serves its Foo with a Deployment (k8s.io/sample-controller/controller.go), written with kopf instead.

- create: a Deployment (spec.replicas of spec.image, port spec.port) and a Service in front of it, both
  with an ownerReference to the Website (kopf.adopt), so the garbage collector removes them with it; an
  existing child of its own (a crash between creating it and kopf recording the handler as done) is
  patched, not created twice; someone else's object of that name makes the handler retry (kopf.TemporaryError);
- update of the spec: the Deployment and the Service follow;
- delete: kopf holds its finalizer until the handler ran; the children go with the owner;
- a timer reports status.readyReplicas (from the Deployment) and status.url;
- Events (core v1, posted by kopf) say what was done.

kopf's own machinery stays unchanged: its finalizer, the `kopf.zalando.org/last-handled-configuration`
annotation, its progress in annotations and status.kopf, peering (`kopf run --peering NAME`).

Run it out of cluster: `kopf run --all-namespaces --peering website-operator examples/operator/website_operator.py`
with KUBECONFIG naming the cluster (see README.md)."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import kopf
import kubernetes
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "example.minik8s.io", "v1", "websites"
MANAGED_BY = "website-operator"
OPERATOR_ID = os.environ.get("WEBSITE_OPERATOR_ID") or socket.gethostname()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """The handlers' client reads the same credentials as kopf's (in-cluster, else the kubeconfig).
    kopf keeps each handler's progress in both its stores, the annotations and status.kopf.progress
    (its default writes only the annotations); its log lines of WARNING and above (a handler failing, a
    retry) become Events too, beside the handlers' own (kopf.event); below that level the timer would post
    one every interval."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    settings.persistence.progress_storage = kopf.MultiProgressStorage([
        kopf.AnnotationsProgressStorage(), kopf.StatusProgressStorage()])
    settings.posting.loggers = True
    settings.posting.level = logging.WARNING
    # each watch request ends after this long and resumes from its last resourceVersion
    settings.watching.server_timeout = int(os.environ.get("WEBSITE_WATCH_TIMEOUT", "120"))
    # how long this operator's entry in the peering object counts as alive without a keep-alive
    settings.peering.lifetime = int(os.environ.get("WEBSITE_PEERING_LIFETIME", "60"))


def labels_of(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": MANAGED_BY}


def children(name: str, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Deployment and the Service of the Website `name`."""
    labels, port = labels_of(name), int(spec.get("port", 80))
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": int(spec.get("replicas", 1)), "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                     "name": "web", "image": spec["image"], "ports": [{"containerPort": port}]}]}}}}
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": port}]}}
    return deployment, service


def _ensure(read: Any, create: Any, patch: Any, owner: kopf.Body, body: dict[str, Any]) -> str:
    """Create the child; when it exists and this Website owns it (an earlier run of the handler, cut short
    before kopf recorded it as done), patch it; when someone else's is in the way, retry later (kopf keeps
    the retry count in its progress storage) until it is gone."""
    name, namespace = body["metadata"]["name"], owner["metadata"]["namespace"]
    try:
        create(namespace, body)
        return "created"
    except ApiException as e:
        if e.status != 409:
            raise
    existing = read(name, namespace)
    if not any(ref.uid == owner["metadata"]["uid"] for ref in existing.metadata.owner_references or []):
        raise kopf.TemporaryError(f"{body['kind']} {name} exists and is not owned by Website {name}", delay=2)
    # a JSON merge patch: lists (ports, containers) replaced as the spec says, not merged by key
    patch(name, namespace, body, _content_type="application/merge-patch+json")
    return "patched"


def reconcile(body: kopf.Body, spec: kopf.Spec, name: str) -> dict[str, str]:
    deployment, service = children(name, dict(spec))
    kopf.adopt([deployment, service], owner=body)
    apps, core = kubernetes.client.AppsV1Api(), kubernetes.client.CoreV1Api()
    did = _ensure(apps.read_namespaced_deployment, apps.create_namespaced_deployment,
                  apps.patch_namespaced_deployment, body, deployment)
    _ensure(core.read_namespaced_service, core.create_namespaced_service, core.patch_namespaced_service, body, service)
    return {"deployment": name, "service": name, "operator": OPERATOR_ID, "action": did}


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_fn(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str | None, logger: kopf.Logger,
              **_: Any) -> dict[str, str]:
    result = reconcile(body, spec, name)
    kopf.event(body, type="Normal", reason="Created",
               message=f"Deployment and Service {name} {result['action']} by {OPERATOR_ID}")
    logger.info("website %s/%s: children %s", namespace, name, result["action"])
    return result


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def update_fn(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str | None, old: Any, new: Any,
              logger: kopf.Logger, **_: Any) -> dict[str, str]:
    result = reconcile(body, spec, name)
    kopf.event(body, type="Normal", reason="Updated",
               message=f"spec {dict(old or {})} -> {dict(new or {})} by {OPERATOR_ID}")
    logger.info("website %s/%s: children follow the spec", namespace, name)
    return result


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_fn(body: kopf.Body, name: str, namespace: str | None, logger: kopf.Logger, **_: Any) -> None:
    kopf.event(body, type="Normal", reason="Deleting", message=f"Deployment and Service {name} go with their owner")
    logger.info("website %s/%s: deleted, its children go with it", namespace, name)


@kopf.timer(GROUP, VERSION, PLURAL, interval=2.0)
def status_fn(spec: kopf.Spec, status: kopf.Status, name: str, namespace: str | None, patch: kopf.Patch,
              **_: Any) -> None:
    """status.readyReplicas from the Deployment and status.url of the Service, written when they change."""
    try:
        deployment = kubernetes.client.AppsV1Api().read_namespaced_deployment(name, namespace or "")
    except ApiException as e:
        if e.status == 404:
            return
        raise
    ready = (deployment.status.ready_replicas if deployment.status else None) or 0
    url = f"http://{name}.{namespace}.svc:{spec.get('port', 80)}"
    if status.get("readyReplicas") != ready:
        patch.status["readyReplicas"] = ready
    if status.get("url") != url:
        patch.status["url"] = url
