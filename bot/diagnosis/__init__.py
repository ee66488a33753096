"""A target becomes one bounded, redacted, classified report: engine, collectors, classifier."""
