"""Benchmarks of minik8s components against real processes (see bench/README.md)."""
