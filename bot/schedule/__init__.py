"""Durable scheduled tasks: stored in the database, claimed once across replicas, run on time."""
