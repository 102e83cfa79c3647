"""ServiceAccounts (upstream: pkg/registry/core/serviceaccount/strategy.go): upstream's
ValidateServiceAccount is ObjectMeta alone (a DNS subdomain name, checked by the generic store); no
status, no defaults. The token subresource is in registry/token.py.
"""

from __future__ import annotations

from apiserver.registry.strategy import Strategy


class ServiceAccountStrategy(Strategy):
    """No rules beyond ObjectMeta (upstream ValidateServiceAccount)."""
