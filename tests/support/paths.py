"""Where the repository, the fixtures and the corpus are, named once so tests can live at any depth."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = ROOT / "tests" / "corpus"
