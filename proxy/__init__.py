"""kube-proxy of minik8s: Services and EndpointSlices into the host's packet filter (`python -m proxy`)."""
