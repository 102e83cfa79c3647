"""The StatefulSet controller (upstream pkg/controller/statefulset)."""

from controllers.statefulset.controller import StatefulSetController

__all__ = ["StatefulSetController"]
