"""Collectors: the only modules that talk to clusters. Each returns observations inside a budget."""
