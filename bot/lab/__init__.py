"""Simulated clusters and a Slack Web API stand-in for the demo, practice and tests."""
