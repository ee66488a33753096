"""The shared vocabulary: observations, findings, reports, targets, and redaction."""
