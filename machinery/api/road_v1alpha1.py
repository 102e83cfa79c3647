"""road.minik8s.io/v1alpha1: the road's wire shape, shared by the road server that serves it and kubectl that
reads it (`mkubectl road`). A road is an object's steps (each with its offset from the road's start) and the
roads of the objects it made, nested."""

from __future__ import annotations

from machinery.types import Obj

GROUP = "road.minik8s.io"
VERSION = "v1alpha1"
GROUP_VERSION = f"{GROUP}/{VERSION}"


def flatten(road: Obj) -> list[Obj]:
    """Every step of a road and its nested roads, in time order, each with the depth of its object."""
    out: list[Obj] = []

    def walk(r: Obj) -> None:
        for st in r.get("steps") or ():
            out.append({**st, "depth": r.get("depth", 0)})
        for child in r.get("roads") or ():
            walk(child)

    walk(road)
    out.sort(key=lambda st: st.get("offset", 0.0))
    return out
