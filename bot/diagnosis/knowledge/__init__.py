"""Tables of field knowledge (Xid codes, Slurm pending reasons), each entry with its source."""
