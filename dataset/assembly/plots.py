"""The job's plots (``OUT/plots/*.png``): strategy counts, bucket mix against the paper, LEIR
versus TIR text lengths, and the speedup histogram when timings were measured."""
from __future__ import annotations

from pathlib import Path

from .difficulty import BUCKETS


def make_plots(folder: Path, stats: dict, lengths: list, speedups: list) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    folder.mkdir(parents=True, exist_ok=True)
    made = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(folder / name, dpi=100, metadata={"Software": None})
        plt.close(fig)
        made.append(name)

    counts = stats["rows_per_strategy"]
    if counts:
        names = sorted(counts, key=lambda s: (-counts[s], s))
        fig, ax = plt.subplots(figsize=(8, max(3.0, 0.28 * len(names) + 1)))
        ax.barh(range(len(names)), [counts[n] for n in names], color="#4878a8")
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("verified rows")
        ax.set_title("Verified rows per strategy")
        save(fig, "strategy_counts.png")

    mix = stats["bucket_mix"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.27
    for k, (label, key) in enumerate((("verified rows", "verified"), ("dataset (filtered)", "dataset"),
                                      ("paper", "paper"))):
        ax.bar([i + (k - 1) * width for i in range(3)], [mix[key][b] for b in BUCKETS], width, label=label)
    ax.set_xticks(range(3), BUCKETS)
    ax.set_ylabel("% of strategy uses")
    ax.set_title("Difficulty mix against the paper")
    ax.legend(fontsize=8)
    save(fig, "bucket_mix.png")

    if lengths:
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.scatter([x[2] for x in lengths], [x[3] for x in lengths], s=6, alpha=0.5, label="transformed")
        ax.scatter([x[0] for x in lengths], [x[1] for x in lengths], s=12, marker="x", label="original")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("LEIR length (characters)")
        ax.set_ylabel("TIR length (characters)")
        ax.set_title("LEIR vs TIR text length")
        ax.legend(fontsize=8)
        save(fig, "text_lengths.png")

    if speedups:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.hist(speedups, bins=30, color="#5a9e6f")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("speedup (original / transformed median time)")
        ax.set_ylabel("rows")
        ax.set_title("Measured speedups")
        save(fig, "speedups.png")
    return made
