"""The ciphers of encryption at rest (upstream: staging/src/k8s.io/apiserver/pkg/storage/value/encrypt/)."""
