"""The apiserver's gate: TLS and the cluster PKI (pki), who is asking (authn), may they (authz),
the bootstrap roles, and the request filter that runs them (gate). The access reviews and the RBAC
escalation check are REST storage, as upstream keeps them: apiserver/registry/authorization.py and
rbac_escalation.py."""
