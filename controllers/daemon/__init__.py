"""The DaemonSet controller (upstream pkg/controller/daemon)."""

from controllers.daemon.controller import DaemonSetsController

__all__ = ["DaemonSetsController"]
