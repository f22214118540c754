"""`pyaccel bench --plot OUT.png`: median speedup per suite per method as grouped bars.

matplotlib is an optional extra (`pip install 'pyaccel[plot]'`), imported only here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Sequence

from .report import ORACLE, SummaryRow
from .runners import PLAIN

INSTALL_HINT = "--plot needs matplotlib: pip install 'pyaccel[plot]' (or pip install matplotlib)"
NOTHING_TO_PLOT = "nothing to plot: the bench ran plain decoding only (add methods to --methods, or --oracle)"


def available() -> bool:
    """Whether matplotlib can be imported (checked before a long bench run, not after it)."""
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(out: Path) -> None:
    """`out` names an image format matplotlib writes (by its extension): checked before a
    long run, since matplotlib would otherwise fail after it, or add .png to a bare name."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = out.suffix.lower().lstrip(".")
    if suffix not in formats:
        said = f"its extension .{suffix} is not an image format" if suffix else "it has no file extension"
        example = out.parent / f"{out.stem or 'speedup'}.png"
        raise ValueError(f"--plot {out}: {said}; end the name in one of .{', .'.join(formats)} (e.g. {example})")


def speedup_grid(rows: Sequence[SummaryRow]) -> tuple[list[str], list[str], list[list[float | None]]]:
    """Suites, methods (plain left out: it is the 1.0 line) and speedups[method][suite] (None: not run)."""
    suites = list(dict.fromkeys(r.suite for r in rows))
    methods = list(dict.fromkeys(r.method for r in rows if r.method != PLAIN))
    by_key = {(r.suite, r.method): r.median_speedup for r in rows}
    return suites, methods, [[by_key.get((s, m)) for s in suites] for m in methods]


def plot_speedups(rows: Sequence[SummaryRow], out: Path, title: str) -> None:
    """Write the grouped bar chart of `rows` to `out` (its format from the file name, e.g. .png)."""
    plt = _pyplot()
    suites, methods, grid = speedup_grid(rows)
    if not methods:
        raise ValueError(NOTHING_TO_PLOT)
    width = min(0.8 / len(methods), 0.3)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(suites) * len(methods) ** 0.5 + 2), 4.0))
    try:
        for i, (method, speedups) in enumerate(zip(methods, grid)):
            xs = [k + (i - (len(methods) - 1) / 2) * width for k, v in enumerate(speedups) if v is not None]
            ys = [v for v in speedups if v is not None]
            ax.bar(xs, ys, width, label=method, hatch="//" if method == ORACLE else None)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="plain")
        ax.set_xticks(range(len(suites)), suites, rotation=20, ha="right")
        ax.set_ylabel("median speedup over plain")
        ax.set_title(title, fontsize="medium")
        ax.legend(fontsize="small")
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
    finally:
        plt.close(fig)
