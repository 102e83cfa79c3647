"""The horizontal pod autoscaler (upstream pkg/controller/podautoscaler)."""
