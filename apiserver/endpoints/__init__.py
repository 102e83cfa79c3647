"""The HTTP side of the apiserver (upstream: k8s.io/apiserver/pkg/endpoints): the generic handlers
(handlers), reading requests (request), writing responses (responsewriters), the subresources' and
virtual resources' endpoints (subresources), the log/exec relay to kubelets (proxy) and the router
of a group-version (installer). It stands on registry/ and storage/; nothing below imports it."""
