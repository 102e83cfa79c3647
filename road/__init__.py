"""minik8s's road server: the live road of an object (the steps the components took for it, from their
OpenTelemetry spans and the object's Events), served as `road.minik8s.io/v1alpha1` behind the apiserver."""
