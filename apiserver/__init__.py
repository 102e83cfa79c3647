"""The apiserver (upstream: staging/src/k8s.io/apiserver and cmd/kube-apiserver): endpoints/ (HTTP:
handlers, request decoding, the installer, log/exec proxying) above registry/ (the generic Store,
the strategies, REST storage of subresources and virtual resources) above storage/ (etcd, the watch
cache); auth/ (authentication, authorization, the request gate), admission and audit beside them.

A regular package, not a namespace package: a namespace package would merge this folder with any
other `apiserver/` on sys.path (an editable install of another checkout), module by module."""
