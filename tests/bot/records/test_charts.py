"""Charts: a real PNG per change, headless."""

from __future__ import annotations

import io

import pytest
from matplotlib import image

from bot.changes.charts import PNG_SIGNATURE, ChartError, change_chart_png
from tests.bot.records.incident_fixture import measured_change


def test_a_change_with_measurements_becomes_a_decodable_png() -> None:
    png = change_chart_png(change=measured_change())
    assert png.startswith(PNG_SIGNATURE)
    pixels = image.imread(io.BytesIO(png), format="png")
    assert pixels.shape[0] == 360 and pixels.shape[1] == 640


def test_a_change_without_measurements_is_refused_clearly() -> None:
    import dataclasses

    with pytest.raises(ChartError, match="no measurements"):
        change_chart_png(change=dataclasses.replace(measured_change(), measurements=()))
