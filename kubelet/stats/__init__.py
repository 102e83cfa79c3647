"""The kubelet's resource stats (upstream pkg/kubelet/stats and pkg/kubelet/server/stats)."""
