"""``python -m search.plot TRAJ.json... [-o PLOT.png]``: best speedup so far against samples,
one line per trajectory (labelled program / algorithm / policy)."""
from __future__ import annotations

import argparse
import sys


def label(rec: dict) -> str:
    o = rec["options"]
    return f"{rec['program']['name']} {o['algorithm']}/{o['policy']}"


def plot_trajectories(trajs, out: str, title: str | None = None) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for t in trajs:
        rec = t.record if hasattr(t, "record") else t
        curve = rec["summary"]["curve"]
        xs = [c[0] for c in curve]
        ys = [c[1] for c in curve]
        ax.step(xs, ys, where="post", label=label(rec))
        best = rec.get("best") or {}
        if best.get("speedup"):
            ax.plot([xs[-1]], [best["speedup"]], marker="o", color=ax.lines[-1].get_color())
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("samples (candidates verified and timed)")
    ax.set_ylabel("best speedup over the original")
    ax.set_title(title or "search progress (dots: confirmed best)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from .trajectory import load_trajectory
    ap = argparse.ArgumentParser(prog="python -m search.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("trajectories", nargs="+")
    ap.add_argument("-o", "--output", help="PNG to write (default: the first trajectory's name with .png)")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    trajs = [load_trajectory(p) for p in a.trajectories]
    out = a.output or (a.trajectories[0].rsplit(".", 1)[0] + ".png")
    plot_trajectories(trajs, out, a.title)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
