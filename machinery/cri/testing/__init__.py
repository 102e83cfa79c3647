"""Test doubles of the CRI (upstream k8s.io/cri-api/pkg/apis/testing)."""
