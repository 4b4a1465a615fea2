"""An evaluation's results as a markdown report and a figure (the pass ladder next to the
paper's Table 2, and the paper's Figure 5: the categories and strategies the model chose; the
menu choosers compared on the menus that can tell them apart)."""
from __future__ import annotations

from pathlib import Path

from .metrics import LADDER, PAPER_TABLE2


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _ladder_table(rows: dict, k: int, head: str) -> list[str]:
    cols = ["prompts", "attempts", *LADDER, "pass@1"] + ([f"pass@{k}"] if k > 1 else [])
    out = [f"| {head} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in rows.items():
        cells = [str(r[c]) if c in ("prompts", "attempts") else _pct(r.get(c)) for c in cols]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def _span(v) -> str:
    return "" if not v else f" [{100 * v[0]:.1f}, {100 * v[1]:.1f}]"


def comparison_table(rows: dict) -> str:
    """One row per chooser (model, random, cost model): prompts, valid answers, agreement with
    the measured-fastest entry and mean regret, each with its interval."""
    out = ["| chooser | menus | valid answers % | agreement with the fastest % | mean regret (best / chosen) |",
           "|---|---|---|---|---|"]
    for name, m in rows.items():
        if m.get("unavailable"):
            out.append(f"| {name} | - | - | - | unavailable: {m['unavailable']} |")
            continue
        reg = m.get("mean_regret")
        ri = m.get("regret_interval")
        out.append(f"| {name} | {m['prompts']} | {_pct(m['valid_rate'])}{_span(m.get('valid_interval'))} | "
                   f"{_pct(m['agreement'])}{_span(m.get('agreement_interval'))} | "
                   f"{'-' if reg is None else format(reg, '.3f')}"
                   f"{'' if not ri else f' [{ri[0]:.3f}, {ri[1]:.3f}]'} |")
    return "\n".join(out)


def _ci(v, pct=True) -> str:
    if not v:
        return ""
    return f" [{100 * v[0]:.1f}, {100 * v[1]:.1f}]" if pct else f" [{v[0]:.3f}, {v[1]:.3f}]"


def _p(test) -> str:
    return "-" if not test or test.get("p") is None else f"{test['p']:.3g}"


def chooser_table(comparison: dict) -> str:
    """One row per chooser on the menus that tell choosers apart (``dataset.evaluate.comparison``):
    valid answers, top-1, pairwise accuracy (of its choice; of its ranking), geometric-mean regret,
    each with its 95% interval, and the signed-rank p-values against random's expectation."""
    out = [f"On the {comparison['menus']} menu(s) that can tell choosers apart (two or more entries, a decisive pair):",
           "", "| chooser | valid % | top-1 % | pairwise, its choice % | pairwise, its ranking % | geo-mean regret | "
           "p vs random: top-1 / regret |", "|---|---|---|---|---|---|---|"]
    for name, r in comparison["choosers"].items():
        if r.get("unavailable"):
            out.append(f"| {name} | - | - | - | - | - | unavailable: {r['unavailable']} |")
            continue
        vs = r.get("vs_random")
        reg = "-" if r["geo_regret"] is None else f"{r['geo_regret']:.3f}{_ci(r['geo_regret_interval'], False)}"
        out.append(f"| {name} | {_pct(r['valid_rate'])}{_ci(r['valid_interval'])} | "
                   f"{_pct(r['top1'])}{_ci(r['top1_interval'])} | "
                   f"{_pct(r['pairwise'])}{_ci(r['pairwise_interval'])} | "
                   f"{_pct(r.get('ranking_pairwise'))}{_ci(r.get('ranking_interval'))} | {reg} | "
                   + ("exact expectation" if vs is None else f"{_p(vs['top1'])} / {_p(vs['log_regret'])}") + " |")
    return "\n".join(out)


def left_out_line(comparison: dict) -> str:
    left = comparison["left_out"]
    total = sum(left.values())
    text = (f"Left out: {total} menu(s)" + (": " + ", ".join(f"{n} {why}" for why, n in left.items() if n) if total
                                              else "") + ".")
    lm = comparison.get("left_out_model")
    if lm:
        text += (f" On them the model answered validly {_pct(lm['valid_rate'])} and chose a fastest entry "
                 f"{_pct(lm['agreement'])}.")
    return (text + " Top-1 and valid with Wilson 95% intervals, pairwise accuracy and geometric-mean regret (best / "
            "chosen speedup; an answer off the timed entries is charged the menu's largest) with bootstrap 95% "
            "intervals over menus; p: two-sided Wilcoxon signed-rank tests of the per-menu difference from random "
            "choice's expectation.")


def markdown(results: dict) -> str:
    job = results["job"]
    lines = [f"# Evaluation of {job['model']}", "",
             f"Dataset `{job['dataset']}`, split `{job['split']}`, {job['attempts']} attempt(s) per prompt at "
             f"temperature {job['temperature']}, verified in {job['trials']} trials ({job['tolerance']}) on "
             f"{job['target']}.", ""]
    s, k = results.get("single"), job["attempts"]
    if s:
        lines += ["## Single-step prompts (paper Table 2)", ""]
        lines += _ladder_table({"all": s["overall"]}, k, "")
        lines += ["", "Paper, one attempt at temperature 0 (2248 held-out prompts): "
                  + "; ".join(f"{m} {v['diff']}/{v['build']}/{v['exec']}/{v['equal']}%" for m, v in PAPER_TABLE2.items())
                  + " (Diff/Build/Exec/Equal).", "", "### By strategy category", ""]
        lines += _ladder_table(s["by_category"], k, "category")
        lines += ["", "### By difficulty bucket", ""]
        lines += _ladder_table(s["by_bucket"], k, "bucket")
        lines += ["", "### Answer statuses", "", "| status | attempts |", "|---|---|"]
        lines += [f"| {st} | {n} |" for st, n in s["statuses"].items()]
        d = s["strategies"]
        lines += ["", "### Strategies chosen (paper Figure 5)", "",
                  "| category | claimed by the model | reached by one rule step | asked (prompts) |", "|---|---|---|---|"]
        cats = sorted(set(d["claimed_categories"]["counts"]) | set(d["reached_categories"]["counts"])
                      | set(d["prompt_categories"]["counts"]))
        for c in cats:
            lines.append(f"| {c} | {d['claimed_categories']['counts'].get(c, 0)} | "
                         f"{d['reached_categories']['counts'].get(c, 0)} | {d['prompt_categories']['counts'].get(c, 0)} |")
        lines += ["", f"Distinct strategies claimed: {d['claimed']['distinct']}; reached: {d['reached']['distinct']} "
                  "(the paper's models used 29 to 31)."]
    m = results.get("menu")
    if m:
        lines += ["", "## Menu prompts", ""]
        if m.get("comparison"):
            lines += [chooser_table(m["comparison"]), "", left_out_line(m["comparison"]), ""]
        lines += [f"All {m['prompts']} menu prompts: valid answers {_pct(m['valid_rate'])}, agreement with the "
                  f"fastest {_pct(m['agreement'])}, with the label {_pct(m['label_agreement'])}; choices of an entry "
                  f"without a measured speedup: {m['unmeasured_choices']}; constraint: "
                  f"{job.get('constraint_kept') or '-'} ({m.get('out_of_form', 0)} answer(s) outside it: the server "
                  "did not enforce it)."]
    if results.get("unfinished"):
        lines += ["", f"**{results['unfinished']} prompt(s) got no answer (llm error) and are not counted; run the "
                  "same command again to ask them again.**"]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> bool:
    """One PNG: the pass ladder (with the paper's Qwen3-8B for reference) and the category mix
    of the strategies chosen. False when there is nothing to draw."""
    s = results.get("single")
    if not s or not s["overall"]["attempts"]:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    xs = range(len(LADDER))
    ours = [100 * (s["overall"][r] or 0) for r in LADDER]
    paper = [PAPER_TABLE2["Qwen3-8B"][r] for r in LADDER]
    ax1.bar([x - 0.2 for x in xs], ours, 0.4, label=results["job"]["model"][:30])
    ax1.bar([x + 0.2 for x in xs], paper, 0.4, label="paper, Qwen3-8B", color="#bbbbbb")
    ax1.set_xticks(list(xs), [r.capitalize() for r in LADDER])
    ax1.set_ylabel("% of attempts")
    ax1.set_ylim(0, 125)
    ax1.set_title("Single-step pass ladder")
    ax1.legend(fontsize=8, loc="upper center", ncol=2)
    d = s["strategies"]
    cats = sorted(set(d["claimed_categories"]["counts"]) | set(d["reached_categories"]["counts"])
                  | set(d["prompt_categories"]["counts"]))
    for j, (key, label) in enumerate((("claimed_categories", "claimed"), ("reached_categories", "reached by a rule"),
                                      ("prompt_categories", "asked"))):
        shares = d[key]["shares"]
        ax2.bar([i + (j - 1) * 0.27 for i in range(len(cats))], [100 * shares.get(c, 0) for c in cats], 0.27,
                label=label)
    ax2.set_xticks(range(len(cats)), cats, fontsize=8)
    ax2.set_ylabel("% of strategy uses")
    ax2.set_title("Strategy categories chosen (Figure 5)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True
