"""The apiserver's gate: TLS and the cluster PKI (pki), who is asking (authn), may they (authz),
the bootstrap roles, the request filter that runs them (gate), and access reviews (reviews)."""
