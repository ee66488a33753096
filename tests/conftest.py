"""Fixtures shared across areas; each area's helpers live in tests/support/<topic>.py."""

pytest_plugins = ["tests.support.postgres", "tests.support.storage", "tests.support.slack"]
