"""One repository per aggregate: the only place that writes SQL."""
