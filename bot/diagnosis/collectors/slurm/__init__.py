"""Slurm collectors: scontrol/sacct (CLI) or slurmrestd, each call bounded."""
