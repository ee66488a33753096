"""Fabric evidence: NCCL and InfiniBand lines mapped to hosts, peers and a scope."""
