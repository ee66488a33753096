"""Named clusters: one bot, many Kubernetes contexts and Slurm clusters (spec, registry, snapshot slots)."""
