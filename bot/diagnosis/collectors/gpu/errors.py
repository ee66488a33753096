"""The one error GPU parsers raise, shared by the nvidia-smi, topology and dcgmi parsers."""

from __future__ import annotations


class GpuParseError(ValueError):
    """The text is not the output the parser expects; the message says what was wrong."""
