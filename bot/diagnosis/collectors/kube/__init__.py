"""Kubernetes collectors: the only code that reads a Kubernetes API server."""
