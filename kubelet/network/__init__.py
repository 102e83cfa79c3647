"""The kubelet's side of pod networking that stays in the kubelet (upstream pkg/kubelet/network): DNS."""
