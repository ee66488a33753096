"""`/triage` subcommands, one module per family; each subcommand defined once."""
