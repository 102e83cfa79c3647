"""Admission (upstream: staging/src/k8s.io/apiserver/pkg/admission and plugin/pkg/admission): the
interfaces the generic store calls (interfaces), the chain with the ServiceAccount plugin and the
admission webhooks (chain), NodeRestriction (noderestriction) and PodSecurity (podsecurity/).
Below the registry: no module here imports it."""
