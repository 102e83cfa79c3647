"""The Container Runtime Interface (k8s.io/cri-api): `api.proto` and the modules grpcio-tools
generates from it (`api_pb2`, `api_pb2_grpc`), shared by the kubelet and the runtimes it talks to."""
