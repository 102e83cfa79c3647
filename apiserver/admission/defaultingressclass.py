"""The DefaultIngressClass admission plugin (upstream plugin/pkg/admission/network/defaultingressclass/
admission.go): a new Ingress that names no class (no spec.ingressClassName, no kubernetes.io/ingress.class
annotation) gets the IngressClass annotated `ingressclass.kubernetes.io/is-default-class: "true"`; with
several such classes, the newest (then the first by name)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from apiserver.admission.interfaces import AdmissionAttributes
from machinery.api.networking_v1 import INGRESS_CLASS_ANNOTATION, IS_DEFAULT_CLASS_ANNOTATION
from machinery.timeutil import parse_rfc3339
from machinery.types import Obj

# every IngressClass, read consistently (a default class created a moment ago counts)
IngressClasses = Callable[[], Awaitable[list[Obj]]]


def default_class(classes: list[Obj]) -> Obj | None:
    """getDefaultClass: the newest class marked default, ties broken by name."""
    marked = [c for c in classes
              if ((c.get("metadata") or {}).get("annotations") or {}).get(IS_DEFAULT_CLASS_ANNOTATION) == "true"]
    if not marked:
        return None

    def created(c: Obj) -> float:
        stamp = parse_rfc3339((c.get("metadata") or {}).get("creationTimestamp"))
        return stamp.timestamp() if stamp is not None else 0.0

    return sorted(marked, key=lambda c: (-created(c), c["metadata"]["name"]))[0]


async def set_default_ingress_class(a: AdmissionAttributes, classes: IngressClasses) -> None:
    info = a.store.info
    if a.operation != "CREATE" or info.group != "networking.k8s.io" or info.plural != "ingresses" \
            or a.subresource or a.obj is None:
        return
    spec = a.obj.setdefault("spec", {})
    annotations = (a.obj.get("metadata") or {}).get("annotations") or {}
    if spec.get("ingressClassName") is not None or INGRESS_CLASS_ANNOTATION in annotations:
        return
    chosen = default_class(await classes())
    if chosen is not None:
        spec["ingressClassName"] = chosen["metadata"]["name"]
