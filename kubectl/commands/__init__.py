"""mkubectl's commands: each module has `register(subparsers, common)` and an `async run(ctx, args)`."""

from __future__ import annotations

from types import ModuleType

from kubectl.commands import apply, config, delete, describe, exec_, get, logs, rollout, scale, version

COMMANDS: tuple[ModuleType, ...] = (apply, get, describe, delete, logs, scale, rollout, exec_, version, config)
