"""Layer classification: a rule catalogue (rules.yaml) turns observations into findings and a verdict."""

from bot.diagnosis.classify.engine import CONFIDENT, diagnose_observations
from bot.diagnosis.classify.lines import LineResult, classify_line

__all__ = ["CONFIDENT", "LineResult", "classify_line", "diagnose_observations"]
