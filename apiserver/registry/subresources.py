"""Subresources: status (the object's .status alone), scale (autoscaling/v1 Scale over
spec.replicas) and binding (the scheduler's way to set a pod's node: the HTTP side here, the write in
the pod's BindingREST, registry/podstorage.py); serviceaccounts/token lives in registry/token.py."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.handlers import ResourceHandlers
from apiserver.patch import UnsupportedPatchType, apply_patch
from apiserver.proxy import exec_endpoints, log_endpoints
from apiserver.registry.generic import Store, WriteOptions, loc_to_path
from apiserver.registry.podstorage import BindingREST
from apiserver.registry.token import token_endpoints
from apiserver.request import check_duplicates, decode_object, read_body, write_options
from apiserver.responsewriters import json_response
from apiserver.validation import required, validate_replicas
from machinery.api.autoscaling_v1 import Scale
from machinery.api.core_v1 import Binding
from machinery.patch import PatchError
from machinery.selectors import label_selector_to_string
from machinery.types import Obj

Endpoint = Callable[..., Any]


# -- status ------------------------------------------------------------------------------------

def status_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        return json_response(await h.store.get(namespace, name))

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.update(request, name, namespace, subresource="status")

    async def patch(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.patch(request, name, namespace, subresource="status")

    return {"GET": get, "PUT": put, "PATCH": patch}


def finalize_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """namespaces/{name}/finalize: the namespace controller empties spec.finalizers here."""

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.update(request, name, namespace, subresource="finalize")

    return {"PUT": put}


# -- scale -------------------------------------------------------------------------------------

def scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                   "selector": label_selector_to_string((obj.get("spec") or {}).get("selector") or {})},
    }


def _checked_scale(store: Store, name: str, scale: Obj) -> Obj:
    try:
        scale = Scale.from_dict(scale).to_dict()
    except ValidationError as e:
        p = e.errors()[0]
        path = loc_to_path(p["loc"])
        raise errors.ApiError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: {path}: {p["msg"]}',
                              {"name": name, "group": "autoscaling", "kind": "Scale",
                               "causes": [{"reason": "FieldValueInvalid", "message": p["msg"], "field": path}]}) from e
    replicas = (scale.get("spec") or {}).get("replicas")
    if replicas is None:
        err = required("spec.replicas")
    elif errs := validate_replicas(replicas, "spec.replicas"):
        err = errs[0]
    else:
        return scale
    raise errors.ApiError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: {err.full()}',
                          {"name": name, "group": "autoscaling", "kind": "Scale",
                           "causes": [{"reason": err.reason, "message": err.message(), "field": err.field}]})


async def _write_scale(store: Store, namespace: str | None, name: str, opts: WriteOptions,
                       make_scale: Callable[[Obj], Obj]) -> Obj:
    async def transform(old: Obj) -> Obj:
        scale = _checked_scale(store, name, make_scale(old))
        pinned = scale["metadata"].get("resourceVersion")
        if pinned and pinned != old["metadata"]["resourceVersion"]:
            raise errors.conflict(store.info, name)
        new = copy.deepcopy(old)
        new.setdefault("spec", {})["replicas"] = scale["spec"]["replicas"]
        return new

    return scale_of(await store.guaranteed_update(namespace, name, transform, opts, None))


def scale_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        return json_response(scale_of(await h.store.get(namespace, name)))

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        body, dups = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        check_duplicates(dups, opts, "Scale")
        return json_response(await _write_scale(h.store, namespace, name, opts, lambda old: body))

    async def patch(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        body = await read_body(request)

        def patched(old: Obj) -> Obj:
            try:
                return apply_patch(scale_of(old), content_type, body, Scale)
            except UnsupportedPatchType as e:
                raise errors.unsupported_media_type(content_type) from e
            except PatchError as e:
                raise errors.bad_request(str(e)) from e

        return json_response(await _write_scale(h.store, namespace, name, opts, patched))

    return {"GET": get, "PUT": put, "PATCH": patch}


# -- binding -----------------------------------------------------------------------------------

def binding_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """The HTTP side of pods/binding; the pod's BindingREST (registry/podstorage.py) does the write."""
    binding_rest = BindingREST(h.store)

    async def post(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        body, _ = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        try:
            binding = Binding.from_dict(body)
        except ValidationError as e:
            raise errors.bad_request(f"invalid Binding: {e.errors()[0]['msg']} at "
                                     f"{loc_to_path(e.errors()[0]['loc'])}") from e
        await binding_rest.create(namespace, name, binding, opts)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                             201)

    return {"POST": post}


SUBRESOURCE_HANDLERS: dict[str, Callable[[ResourceHandlers], dict[str, Endpoint]]] = {
    "status": status_endpoints,
    "finalize": finalize_endpoints,
    "scale": scale_endpoints,
    "binding": binding_endpoints,
    "log": log_endpoints,
    "exec": exec_endpoints,
    "token": token_endpoints,
}
