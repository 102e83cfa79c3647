"""Small builders of wire-form manifests for tests."""

from __future__ import annotations

from typing import Any


def pod(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
        image: str = "busybox:1.36", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {"app": "test"}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "main", "image": image}], **spec}}


def deployment(name: str, replicas: int = 2, image: str = "nginx:1.25", app: str | None = None) -> dict[str, Any]:
    app = app or name
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                         "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]}},
        },
    }


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}}
