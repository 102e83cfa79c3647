"""Names the kubelet's packages share (upstream pkg/kubelet/types)."""
