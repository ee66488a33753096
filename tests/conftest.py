"""Shared fixtures live in tests/support; this file only makes the repository importable."""
