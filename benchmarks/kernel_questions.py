"""How much of a kernel the kernel search's question shows: every slot of the bundled examples,
the corpus and the KernelBench files of ``benchmarks/kernelbench/``.

    python benchmarks/kernel_questions.py [--budget 2000] [--json OUT.json]

Per slot: the kernel's moves (``search.kernel_slots.kernel_candidates``, composite moves
included), the moves its first page shows, and that page's size in estimated tokens
(``search.prompt.estimate_tokens``) and characters. The summary says how many first pages show
every move or at least ``MIN_SHOWN`` of them, and the largest page.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def programs() -> list:
    from dataset.translate.graph import translate
    from dataset.translate.kernelbench import load
    from engine import load_program
    from engine.leir.files import load_programs
    out = [load_program(p) for p in sorted((ROOT / "examples").glob("*.leir"))]
    out += load_programs(str(ROOT / "examples" / "corpus" / "programs.jsonl"))
    for f in sorted((ROOT / "benchmarks" / "kernelbench").glob("*.py")):
        got = load(f)
        out.append(translate(got.model, got.inputs, got.name).program)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/kernel_questions.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=2000, help="the prompt budget (--prompt-tokens), default 2000")
    ap.add_argument("--json", help="also write every slot's figures here")
    a = ap.parse_args(argv)
    from engine import Engine
    from engine.leir.canonical import renaming_key
    from search import SearchOptions
    from search.composite import load_table
    from search.kernel_question import MIN_SHOWN, KernelState, candidate_move, kernel_question
    from search.kernel_slots import kernel_candidates, split
    from search.space import Space
    engine = Engine(strategies="paper,extra")
    composites = Space(engine, load_table(None, [s.name for s in engine.rulebook.strategies])).composites
    opts = SearchOptions(prompt_tokens=a.budget)
    rows = []
    for p in programs():
        slots = split(p)
        for i, sl in enumerate(slots):
            found = kernel_candidates(engine, sl.kernel, composites)
            q = kernel_question(KernelState(p.name, i, len(slots), sl.kernel, renaming_key(sl.kernel)),
                                [candidate_move(c, sl.kernel) for c in found], opts)
            page = q.first()
            rows.append({"program": p.name, "slot": i, "statements": len(sl.kernel.body), "moves": len(found),
                         "shown": len(page.shown_moves), "tokens": page.tokens(), "chars": page.chars()})
    ok = [r for r in rows if r["shown"] >= min(MIN_SHOWN, r["moves"])]
    worst = min(rows, key=lambda r: (r["shown"] - min(MIN_SHOWN, r["moves"]), r["shown"]))
    summary = {"slots": len(rows), "programs": len({r["program"] for r in rows}),
               "first_pages_with_all_or_30": len(ok), "all_moves_on_first_page": sum(r["shown"] == r["moves"]
                                                                                      for r in rows),
               "moves_max": max(r["moves"] for r in rows), "tokens_max": max(r["tokens"] for r in rows),
               "chars_max": max(r["chars"] for r in rows), "worst": worst, "budget": a.budget}
    print(json.dumps(summary, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "slots": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
