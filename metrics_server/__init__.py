"""minik8s's metrics-server: the `metrics.k8s.io/v1beta1` API (NodeMetrics, PodMetrics) from the
kubelets' `/stats/summary` (upstream kubernetes-sigs/metrics-server)."""
