"""What every figure shares: the mode and arm colours, each row's arm, and how a figure is saved."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from core.disentanglement.artifacts import atomic_path  # noqa: E402
from experiments.synthetic_sequences.arms import arm_name  # noqa: E402

MODE_COLOURS = {"mean": "#4C72B0", "sum": "#DD8452"}
PNG_COLOURS = 256  # an adaptive palette: lines and text lose nothing legible (bench/README.md has the sizes)


def save(fig, path: Path) -> None:
    """The figure as a palette PNG: a figure of many panels stays a file a reader opens at 100% and snakemake --report
    embeds."""
    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    image = Image.open(drawn).convert("RGB").quantize(colors=PNG_COLOURS, method=Image.Quantize.MEDIANCUT)
    with atomic_path(path) as tmp:
        image.save(tmp, format="PNG", optimize=True)


ARM_STYLES = {  # arm -> (colour, line style): a control is drawn in the colour of the mode it runs, dashed
    "mean": (MODE_COLOURS["mean"], "-"),
    "sum": (MODE_COLOURS["sum"], "-"),
    "scale": (MODE_COLOURS["mean"], "--"),
    "balance": (MODE_COLOURS["sum"], "--"),
}


def arm_column(frame: pd.DataFrame) -> np.ndarray:
    """Each row's arm: its mode in a main family, its control (scale, balance) in a control family."""
    return np.array([arm_name(mode, controls) for mode, controls in zip(frame["mode"], frame.controls, strict=True)], dtype=object)
