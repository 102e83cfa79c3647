"""The EndpointSlice controller (upstream pkg/controller/endpointslice) and the slice packing it
shares with the mirroring controller (staging/src/k8s.io/endpointslice)."""

from controllers.endpointslice.controller import EndpointSliceController

__all__ = ["EndpointSliceController"]
