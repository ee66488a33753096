"""Persistence: engine, SQLModel tables, repositories, migrations. Imports nothing of ours."""
