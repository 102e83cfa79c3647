"""What every command gets: the API client, the namespace in effect, the resolver, stdout and stderr."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from kubectl.client import KubectlClient
from kubectl.resources import Resolver
from machinery.api.resources import ResourceInfo


@dataclass
class Context:
    client: KubectlClient
    namespace: str  # -n, else the kubeconfig context's, else "default"
    explicit_namespace: bool  # -n was given (apply refuses a manifest of another namespace then)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def __post_init__(self) -> None:
        self.resolver = Resolver(self.client)

    def ns_for(self, info: ResourceInfo, all_namespaces: bool = False) -> str | None:
        """The namespace a request for `info` goes to (None: cluster-scoped, or all namespaces)."""
        if not info.namespaced or all_namespaces:
            return None
        return self.namespace

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def warn(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()
