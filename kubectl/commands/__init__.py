"""mkubectl's commands: each module has `register(subparsers, common)` and an `async run(ctx, args)`."""

from __future__ import annotations

from types import ModuleType

from kubectl.commands import (
    apply,
    config,
    create,
    delete,
    describe,
    drain,
    exec_,
    expose,
    get,
    logs,
    road,
    rollout,
    scale,
    version,
)

COMMANDS: tuple[ModuleType, ...] = (create, expose, apply, get, describe, delete, logs, scale, rollout, exec_, version,
                                   config, drain, road)
