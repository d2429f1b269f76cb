"""What the night's pictures share: Okabe and Ito's colours, told apart with any colour
vision, and the width every picture is drawn at (1000 px at matplotlib's 100 dpi)."""

from __future__ import annotations

BLUE = "#0072B2"
ORANGE = "#E69F00"
SKY = "#56B4E9"
GREEN = "#009E73"  # bluish green
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"  # reddish purple
GREY = "#999999"
BLACK = "#000000"

WIDTH = 10.0  # inches: 1000 px wide at the default 100 dpi


def signed(value: float) -> str:
    """A gain for people: "+0.050", "−0.020" (a real minus sign)."""
    return f"{value:+.3f}".replace("-", "\u2212")
