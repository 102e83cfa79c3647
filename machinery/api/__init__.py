"""One pydantic model per API object, shared by every process (apimachinery + k8s.io/api)."""
