"""The pod lifecycle event generator (upstream pkg/kubelet/pleg)."""
