"""GPU node evidence: nvidia-smi, dcgmi, topology, DCGM exporter metrics."""
