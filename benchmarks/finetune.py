"""Does the model learn from every timing? Timed questions of corpus programs -> tune SmolLM2 -> compare
on operator families it never saw.

    python benchmarks/finetune.py [--out DIR] [--phase data|train|eval|search|table|all] [--test-fraction 0.3]
                                  [--train-data DIR ...] [--test-data DIR] [--menu-size 6] [--prompt-tokens 1000]
                                  [--program-time-limit 1200] [--examples kernel_menu,pairwise,pointwise,menu]
                                  [--max-steps 60] [--threads 2] [--answers number,rank] [--budget 16]
                                  [--programs 6] [--algorithms kernels,greedy] [--policies random,cost,untuned,tuned]
                                  [--seeds 0,1,2] [--jobs 1]

The split holds out whole operator families (``dataset.families``): the families ranked by a hash of
their names (``dataset.assembly.assemble.held_out_types``, the rule of ``dataset.generate --split-by
family``, seed 0), the first ``--test-fraction`` of them held out (default 0.3: 21 corpus programs of 3
families held out, 78 of 7 trained on), so no family is on both sides. ``DIR/split.json`` records it.
Every phase is a project command run as a user runs it (``run``), resumable (what is finished is a file
under DIR and is skipped when run again), with progress lines and the load average at its start and
end (``DIR/loads.json``):

* ``data``: ``python -m dataset.generate --time --menu --kernel-menu`` (menu rows, the kernel search's
  own short questions, and from every timed question the pairwise and pointwise examples) on the held-out
  programs (``DIR/ds-test``) and on the training programs in chunks of 20 (``DIR/ds-trainN``), each
  chunk a dataset folder skipped once complete (``dataset.generate`` itself resumes a killed chunk).
  ``--train-data`` / ``--test-data`` name existing dataset folders instead.
* ``train``: the examples of each kind (``--examples``) and their programs counted
  (``DIR/training_examples.json``, against the bar of 1,000 examples from 60 programs); ``python -m
  dataset.train --export-base`` -> ``DIR/untuned`` (the untuned control, the tuned model's f16 writer)
  and ``python -m dataset.train --examples ...`` on every training folder -> ``DIR/tuned``.
* ``eval``: the held-out menus that can tell choosers apart counted (``DIR/heldout_menus.json``, against
  the bar of 100 from 15 programs); llama.cpp's server with each model, ``python -m dataset.evaluate
  --kind menu --split all --answer A --train-data TRAIN...`` for every ``--answers`` A: the comparison
  (top-1, pairwise, geometric-mean regret, intervals, signed-rank tests against random) next to random,
  fixed positions, the strategy prior and the cost model. (``dataset.evaluate`` asks menu and
  single-step prompts: the kernel rows are trained on, not evaluated.)
* ``search``: ``python -m search --algorithm A --budget B`` for every ``--algorithms`` A on
  ``--programs`` held-out programs (shrunk as the data's, taken from the held-out families in turn),
  every ``--policies`` policy (``random``: among exactly what the model is shown; ``cost``; ``untuned``
  and ``tuned``: ``--policy llm`` with that model) and every ``--seeds`` seed, asked the data's question
  (``QUESTION``).
* ``table``: ``DIR/report.md`` and ``DIR/report.json``: the split, the data, the bars, the evaluation
  tables and, per algorithm, program and policy, the median and range over seeds of the confirmed
  speedups (each search's best re-timed against the original), the machine, the target, the loads.
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

from engine.leir.diagnostics import LeirError  # noqa: E402
from search.features import DEFAULT_STRATEGIES  # noqa: E402  (the search's strategy set: the menus must match)

CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"
CHUNK = 20
SPLIT_SEED = 0             # the seed of the family ranking (dataset.generate's default --seed)
SHRINK_POINTS = 16384      # dataset.generate --shrink's default target
MAX_POINTS = 4194304       # and the --max-points the data phase gives it
TIE = 0.02                 # the timing noise floor (docs/dataset.md): within it, "matches"
TARGET = "llvm"            # every phase builds and times on this machine's CPU
MODELS = ("untuned", "tuned")      # DIR/NAME/model.gguf, served under the alias NAME
# the bars of issue 39: a run below one says so in the report
BARS = {"held-out programs": 15, "training programs": 60, "training examples": 1000,
        "programs of the training examples": 60, "held-out menus that tell choosers apart": 100,
        "programs of those menus": 15}
# --policies: name -> (python -m search --policy, the model served to it or None)
POLICIES = {"random": ("random", None), "cost": ("cost", None), "untuned": ("llm", "untuned"),
            "tuned": ("llm", "tuned")}
# --algorithms: the question each asks, as the data phase asks it. greedy: the menu rows' one-step menus
# (no composite moves, which auto would give random and cost but not llm); kernels: the kernel rows'
# question, which shows the kernel's composite moves (dataset.text.kernel_menu asks it so)
QUESTION = {"greedy": {"--composites": "off"}, "kernels": {"--composites": "on"}}
ANSWERS = ("number", "rank")       # dataset.evaluate --answer


def run(cmd: list, log: Path, env=None) -> None:
    """A project command as a user runs it, its output in ``log``; a failure stops the phase."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    with open(log, "ab") as out:
        r = subprocess.run([sys.executable, *map(str, cmd)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                           env=env or os.environ)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): see {log}")


def say(msg: str) -> None:
    print(msg, flush=True)


def _write_json(path: Path, obj) -> None:
    from engine.leir.files import write_atomic
    write_atomic(path, json.dumps(obj, indent=1) + "\n")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def note_load(out: Path, phase: str, when: str) -> None:
    """The load average at a phase's start or end, in ``DIR/loads.json`` and on stdout."""
    load = [round(x, 2) for x in os.getloadavg()]
    loads = _read_json(out / "loads.json") or []
    loads.append({"phase": phase, "when": when, "load": load, "at": time.strftime("%Y-%m-%d %H:%M:%S")})
    _write_json(out / "loads.json", loads)
    say(f"{phase}: {when}, load average {' '.join(map(str, load))}")


# ------------------------------------------------------------------ the split


def corpus_rows() -> list[dict]:
    return [json.loads(x) for x in CORPUS.read_text().splitlines() if x.strip()]


def family_split(rows: list[dict], fraction: float) -> dict:
    """Whole operator families on each side: ``dataset.generate --split-by family``'s rule over the
    corpus names. Programs keep the corpus order."""
    from dataset.assembly.assemble import held_out_types
    from dataset.families import family
    names = [r["name"] for r in rows]
    test = held_out_types(names, SPLIT_SEED, fraction, family)
    side = {n: "test" if n in test else "train" for n in names}
    fams = {s: sorted({family(n) for n in names if side[n] == s}) for s in ("train", "test")}
    return {"rule": "dataset.generate --split-by family: families ranked by sha256('SEED:split:FAMILY'), the "
                    "first round(fraction x families) held out", "seed": SPLIT_SEED, "test_fraction": fraction,
            "families": fams,
            "programs": {s: [{"name": n, "family": family(n)} for n in names if side[n] == s]
                         for s in ("train", "test")}}


def write_split(a) -> dict:
    """``DIR/split.json`` and the programs' source files: ``DIR/sources/test.jsonl`` (the held-out
    programs) and ``DIR/sources/trainN.jsonl`` (the training programs in a hash order, ``CHUNK`` a
    file). Deterministic, so a resumed run writes the same bytes."""
    out = Path(a.out)
    rows = corpus_rows()
    split = family_split(rows, a.test_fraction)
    if not split["programs"]["test"]:
        raise LeirError(f"--test-fraction {a.test_fraction} holds out no family")
    _write_json(out / "split.json", split)
    by_name = {r["name"]: r for r in rows}
    src = out / "sources"
    from engine.leir.files import write_atomic
    write_atomic(src / "test.jsonl", "".join(json.dumps(by_name[p["name"]]) + "\n" for p in split["programs"]["test"]))
    train = sorted((p["name"] for p in split["programs"]["train"]), key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    chunks = []
    for i in range(0, len(train), CHUNK):
        p = src / f"train{i // CHUNK}.jsonl"
        write_atomic(p, "".join(json.dumps(by_name[n]) + "\n" for n in train[i:i + CHUNK]))
        chunks.append(p)
    split["chunks"] = chunks
    return split


def split_bars(split: dict) -> dict:
    n = {s: len(split["programs"][s]) for s in ("train", "test")}
    return {"held-out programs": n["test"], "training programs": n["train"]}


# ------------------------------------------------------------------ data


def generate_cmd(src: Path, dest: Path, a) -> list:
    return ["-m", "dataset.generate", src, "-o", dest, "--time", "--menu", "--kernel-menu", "--menu-size",
            a.menu_size, "--prompt-tokens", a.prompt_tokens, "--rounds", "10", "--shrink", "--max-points", MAX_POINTS,
            "--per-program", a.per_program, "--seed", "0", "--no-plots", "--workers", a.workers,
            "--test-fraction", "0", "--strategies", a.strategies, "--depth", a.depth, "--walks", a.walks,
            "--program-time-limit", a.program_time_limit, "--target", TARGET]


def chunk_complete(src: Path, dest: Path) -> bool:
    """Whether ``dest`` holds the finished dataset of ``src`` (its files moved into place: the
    assembly's staging folder gone). A dataset of other programs is refused, never reused."""
    stats = _read_json(dest / "stats.json")
    if stats is None or (dest / ".journal" / "staging").exists():
        return False
    made = [s.get("sha256") for s in (stats.get("job") or {}).get("sources") or []]
    if made != [_sha256(src)]:
        raise LeirError(f"{dest} holds a dataset of other programs than {src} (an earlier split or version of this "
                        "benchmark): give another --out, or remove the folder")
    return True


def example_files() -> dict:
    from dataset.train.training_examples import KINDS
    return {kind: files[0] for kind, files in KINDS.items()}


def folder_counts(dest: Path) -> dict:
    """A finished dataset's programs (and those left out) and its examples of each kind (both splits)."""
    stats = _read_json(dest / "stats.json") or {}
    src = stats.get("sources") or {}
    return {"programs": src.get("programs"), "left_out": sum((src.get("skipped") or {}).values()),
            "examples": {kind: sum(sum(1 for line in (dest / s / name).read_text().splitlines() if line.strip())
                                   for s in ("train", "test") if (dest / s / name).is_file())
                         for kind, name in example_files().items()}}


def _counts_text(c: dict) -> str:
    return (f"{c['programs']} programs, {c['left_out']} left out; examples: "
            + ", ".join(f"{k} {v}" for k, v in c["examples"].items()))


def data_jobs(a, split: dict) -> list[tuple[str, Path, Path]]:
    """(name, source file, dataset folder) of every chunk the data phase makes."""
    out = Path(a.out)
    jobs = [] if a.test_data else [("test", out / "sources" / "test.jsonl", out / "ds-test")]
    if not a.train_data:
        jobs += [(c.stem, c, out / f"ds-{c.stem}") for c in split["chunks"]]
    return jobs


def data_folders(a) -> tuple[list[Path], Path]:
    """(training dataset folders, the held-out one): the data phase's, or ``--train-data``/``--test-data``."""
    out = Path(a.out)
    if a.train_data and a.test_data:
        return [Path(p) for p in a.train_data], Path(a.test_data)
    split = write_split(a)
    train = [Path(p) for p in a.train_data] if a.train_data else [out / f"ds-{c.stem}" for c in split["chunks"]]
    return train, Path(a.test_data) if a.test_data else out / "ds-test"


def phase_data(a) -> None:
    split = write_split(a)
    bars = split_bars(split)
    say(f"data: split by family: held out {', '.join(split['families']['test'])} ({bars['held-out programs']} "
        f"programs), trained on {', '.join(split['families']['train'])} ({bars['training programs']} programs)")
    jobs = data_jobs(a, split)
    for i, (name, src, dest) in enumerate(jobs, 1):
        tag = f"data: chunk {i}/{len(jobs)} {name}"
        if chunk_complete(src, dest):
            say(f"{tag}: complete before ({_counts_text(folder_counts(dest))})")
            continue
        programs = sum(1 for line in src.read_text().splitlines() if line.strip())
        say(f"{tag}: started ({programs} programs)")
        run(generate_cmd(src, dest, a), dest.with_suffix(".log"))
        say(f"{tag}: finished ({_counts_text(folder_counts(dest))})")


# ------------------------------------------------------------------ train


def _program_name(rec: dict):
    p = rec.get("program")
    return p.get("name") if isinstance(p, dict) else p


def example_census(folders: list[Path], kinds) -> dict:
    """How many training examples of each kind the folders' training split holds, and from how
    many programs (each kind's and all together)."""
    from dataset.train.training_examples import KINDS, split_files
    per, everyone = {}, set()
    for kind in kinds:
        n, programs = 0, set()
        for folder in folders:
            for path in split_files(folder, KINDS[kind][0], "train"):
                for line in path.read_text().splitlines():
                    if line.strip():
                        n += 1
                        programs.add(_program_name(json.loads(line)))
        programs.discard(None)
        per[kind] = {"examples": n, "programs": len(programs)}
        everyone |= programs
    return {"kinds": per, "examples": sum(k["examples"] for k in per.values()), "programs": len(everyone),
            "folders": [p.name for p in with_examples(folders, kinds)]}


def with_examples(folders: list[Path], kinds) -> list[Path]:
    """The folders whose training split has a file of one of the ``kinds``."""
    from dataset.train.training_examples import KINDS, split_files
    return [p for p in folders if any(split_files(p, KINDS[k][0], "train") for k in kinds)]


def bar_lines(measured: dict) -> list[str]:
    """One line per bar of ``BARS`` that ``measured`` holds: the figure, the bar, met or not."""
    return [f"{name}: {measured[name]} (bar {bar:,}: {'met' if measured[name] >= bar else 'NOT met'})"
            for name, bar in BARS.items() if name in measured]


def trained(folder: Path) -> bool:
    """A finished ``dataset.train`` output (the summary is written last)."""
    return (folder / "model.gguf").exists() and (folder / "summary.json").exists()


def phase_train(a) -> None:
    from dataset.train.training_examples import parse_kinds
    out = Path(a.out)
    train, _ = data_folders(a)
    kinds = parse_kinds(a.examples)
    census = example_census([p for p in train if p.is_dir()], kinds)
    _write_json(out / "training_examples.json", census)
    say("train: " + "; ".join(f"{k}: {v['examples']} examples from {v['programs']} programs"
                              for k, v in census["kinds"].items()))
    for line in bar_lines({"training examples": census["examples"],
                           "programs of the training examples": census["programs"]}):
        say(f"train: {line}")
    untuned = out / "untuned"
    if trained(untuned):
        say(f"train: the untuned control {untuned} exported before")
    else:
        run(["-m", "dataset.train", "-o", untuned, "--export-base", "--threads", a.threads]
            + (["--resume"] if (untuned / "train.json").exists() else []), out / "untuned.log")
    tuned = out / "tuned"
    if trained(tuned):
        say(f"train: {tuned} trained before")
        return
    have = with_examples([p for p in train if p.is_dir()], kinds)
    if not have:
        raise LeirError(f"no {', '.join(kinds)} examples in the training split of "
                        f"{', '.join(str(p) for p in train)} (run --phase data first)")
    cmd = ["-m", "dataset.train", *have, "-o", tuned, "--examples",
           ",".join(kinds), "--max-steps", a.max_steps, "--threads", a.threads, "--save-steps", "5", "--grad-accum",
           a.grad_accum, "--lr", a.lr, "--max-length", "1536"]
    if a.lora_layers:
        cmd += ["--lora-layers", a.lora_layers]
    if (tuned / "train.json").exists():
        cmd.append("--resume")
    run(cmd, out / "train.log")


# ------------------------------------------------------------------ serving


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


def model_gguf(a, name: str) -> Path:
    """``DIR/NAME/model.gguf``, the train phase's export (the tuned model and the untuned control)."""
    p = Path(a.out) / name / "model.gguf"
    if not trained(p.parent):
        raise LeirError(f"no finished {name} model in {p.parent} (run --phase train first)")
    return p


# ------------------------------------------------------------------ eval


def heldout_menus(test: Path) -> dict:
    """The held-out menu rows that can tell choosers apart (``dataset.evaluate.menu_facts``: two or more
    entries and a decisive pair), and their programs; the others by reason."""
    from collections import Counter

    from dataset.evaluate.items import menu_items
    from dataset.evaluate.menu_facts import menu_facts
    items = menu_items(test, "all", "") if test.is_dir() else []
    facts = [(it, menu_facts(it)) for it in items]
    counted = [it for it, f in facts if f.left_out is None]
    programs = {_program_name(it) for it in counted} - {None}
    return {"folder": test.name, "menus": len(items), "non_trivial": len(counted), "programs": len(programs),
            "left_out": dict(sorted(Counter(f.left_out for _, f in facts if f.left_out is not None).items()))}


def evaluated(dest: Path) -> bool:
    """A finished evaluation: its results, every prompt answered."""
    res = _read_json(dest / "results.json")
    return res is not None and res.get("unfinished") == 0


def evaluate_cmd(test: Path, train: list[Path], url: str, model: str, answer: str, dest: Path) -> list:
    cmd = ["-m", "dataset.evaluate", test, "--split", "all", "--kind", "menu", "--answer", answer, "--endpoint", url,
           "--model", model, "--max-tokens", "8", "--concurrency", "1", "--llm-timeout", "600", "-o", dest, "--no-plot"]
    return cmd + (["--train-data", *train] if train else [])


def phase_eval(a) -> None:
    out = Path(a.out)
    train, test = data_folders(a)
    census = heldout_menus(test)
    _write_json(out / "heldout_menus.json", census)
    left = ", ".join(f"{n} {why}" for why, n in census["left_out"].items()) or "none"
    say(f"eval: {census['menus']} held-out menu rows, {census['non_trivial']} that tell choosers apart from "
        f"{census['programs']} programs (left out: {left})")
    for line in bar_lines({"held-out menus that tell choosers apart": census["non_trivial"],
                           "programs of those menus": census["programs"]}):
        say(f"eval: {line}")
    train = [p for p in train if p.is_dir()]
    for name in MODELS:
        todo = [ans for ans in a.answers if not evaluated(out / f"eval-{name}-{ans}")]
        say(f"eval: {name}: {len(a.answers) - len(todo)} of {len(a.answers)} evaluations finished before")
        if not todo:
            continue
        with llama_server(model_gguf(a, name), name, out / f"server-{name}.log", a.threads) as url:
            for ans in todo:
                dest = out / f"eval-{name}-{ans}"
                run(evaluate_cmd(test, train, url, name, ans, dest), out / f"eval-{name}-{ans}.log")


# ------------------------------------------------------------------ search


def heldout_programs(a) -> list[Path]:
    """``--programs`` held-out corpus programs, one family after another in turn (corpus order within
    a family), shrunk as ``dataset.generate --shrink`` shrinks them (the instances their rows ask
    about), as JSON program files under ``DIR/programs``."""
    from engine.leir.files import program_from_json, write_atomic
    from dataset.generate.shrink import WIDE_GRANULARITIES, points, shrink_with_granularity, smallest_instance
    split = write_split(a)
    by_name = {r["name"]: r for r in corpus_rows()}
    queues = {f: [p["name"] for p in split["programs"]["test"] if p["family"] == f] for f in split["families"]["test"]}
    folder = Path(a.out) / "programs"
    out = []
    while len(out) < a.programs and any(queues.values()):
        for fam in split["families"]["test"]:
            if not queues[fam] or len(out) == a.programs:
                continue
            name = queues[fam].pop(0)
            p = folder / f"{name}.json"
            if not p.exists():
                prog = program_from_json(by_name[name])
                if points(prog) > SHRINK_POINTS:
                    small, _ = shrink_with_granularity(prog, SHRINK_POINTS, WIDE_GRANULARITIES)
                    prog = small if small is not None else smallest_instance(prog)[0]
                if prog is None or points(prog) > MAX_POINTS:
                    continue
                write_atomic(p, json.dumps(prog.to_json()) + "\n")
            out.append(p)
    return out


def search_cmd(prog: Path, dest: Path, algorithm: str, policy: str, seed: int, a, url=None, model=None) -> list:
    """``python -m search`` on ``prog``, asked the question the data asks (``QUESTION``)."""
    cmd = ["-m", "search", prog, "-o", dest, "--algorithm", algorithm, "--policy", policy, "--budget", a.budget,
           "--seed", seed, "--menu-size", a.menu_size, "--prompt-tokens", a.prompt_tokens,
           "--strategies", a.strategies, "--target", TARGET, "--quiet"]
    for flag, value in QUESTION[algorithm].items():
        cmd += [flag, value]
    if url:
        cmd += ["--endpoint", url, "--model", model, "--max-tokens", "8", "--llm-timeout", "600"]
    return cmd


def finished(path: Path) -> bool:
    """A trajectory the search completed (it writes checkpoints while it runs)."""
    rec = _read_json(path)
    return isinstance(rec, dict) and bool(rec.get("complete"))


def run_all(cmds: list, log: Path, jobs: int) -> None:
    """Commands ``jobs`` at a time (each a search of its own)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(jobs) as pool:
        for f in [pool.submit(run, c, log) for c in cmds]:
            f.result()


def trajectory_path(a, algorithm: str, prog: Path, policy: str, seed: int) -> Path:
    return Path(a.out) / "search" / algorithm / f"{prog.stem}-{policy}-{seed}.json"


def phase_search(a) -> None:
    progs = heldout_programs(a)
    say(f"search: {len(progs)} held-out programs: {', '.join(p.stem for p in progs)}")
    log = Path(a.out) / "search" / "search.log"
    plan = [(alg, p, pol, seed) for alg in a.algorithms for p in progs for pol in a.policies for seed in a.seeds]
    todo = [x for x in plan if not finished(trajectory_path(a, *x))]
    say(f"search: {len(plan) - len(todo)} of {len(plan)} searches finished before")
    for model in (None, *MODELS):          # the policies without a model first, then each model's server once
        mine = [x for x in todo if POLICIES[x[2]][1] == model]
        if not mine:
            continue
        for x in mine:
            trajectory_path(a, *x).unlink(missing_ok=True)        # an interrupted one starts again
        say(f"search: {len(mine)} searches with {model or 'the policies without a model'}")
        if model is None:
            run_all(search_cmds(a, mine), log, a.jobs)
            continue
        with llama_server(model_gguf(a, model), model, Path(a.out) / f"server-{model}.log", a.threads) as url:
            run_all(search_cmds(a, mine, url, model), log, a.jobs)


def search_cmds(a, plan: list, url=None, model=None) -> list:
    return [search_cmd(p, trajectory_path(a, alg, p, pol, seed), alg, POLICIES[pol][0], seed, a, url, model)
            for alg, p, pol, seed in plan]


# ------------------------------------------------------------------ table


def _best(path: Path):
    """The confirmed speedup of a finished search's best program (1.0: nothing beat the original)."""
    return json.loads(path.read_text())["best"]["speedup"] if finished(path) else None


def search_results(a, progs: list[Path]) -> list[dict]:
    """Per algorithm, program and policy: the confirmed speedup of each seed, their median and range."""
    rows = []
    for alg in a.algorithms:
        for p in progs:
            for pol in a.policies:
                got = {seed: _best(trajectory_path(a, alg, p, pol, seed)) for seed in a.seeds}
                done = [v for v in got.values() if v is not None]
                rows.append({"algorithm": alg, "program": p.stem, "policy": pol, "seeds": got,
                             "median": statistics.median(done) if done else None,
                             "range": [min(done), max(done)] if done else None})
    return rows


def versus_random(rows: list[dict]) -> dict:
    """Per algorithm and policy: on how many programs its median matches or beats random's (within
    the noise floor ``TIE``), of the programs both have."""
    med = {(r["algorithm"], r["program"], r["policy"]): r["median"] for r in rows}
    out = {}
    for alg, prog, pol in med:
        rnd = med.get((alg, prog, "random"))
        if pol == "random" or rnd is None or med[(alg, prog, pol)] is None:
            continue
        won, of = out.setdefault(alg, {}).get(pol, (0, 0))
        out[alg][pol] = (won + (med[(alg, prog, pol)] >= rnd / (1 + TIE)), of + 1)
    return {alg: {pol: {"matches_or_beats": w, "programs": n} for pol, (w, n) in d.items()} for alg, d in out.items()}


def evaluation_rows(out: Path, answers) -> tuple[dict, list[str]]:
    """The evaluations' comparisons as one: each model's row per answer form, then the baselines of
    the first (every run compares on the same menus with the same seed); notes where they differ."""
    choosers, base, notes = {}, None, []
    for name in MODELS:
        for ans in answers:
            res = _read_json(out / f"eval-{name}-{ans}" / "results.json")
            c = ((res or {}).get("menu") or {}).get("comparison")
            if not c:
                continue
            if res.get("unfinished"):
                notes.append(f"eval-{name}-{ans}: {res['unfinished']} prompt(s) unanswered")
            choosers[f"SmolLM2 {name} ({ans})"] = c["choosers"][c["model"]]
            if base is None:
                base = c
            elif c["menus"] != base["menus"]:
                notes.append(f"eval-{name}-{ans} compares on {c['menus']} menus, the baselines' run on {base['menus']}")
    if base is None:
        return {}, notes
    choosers |= {k: v for k, v in base["choosers"].items() if k != base["model"]}
    return {"menus": base["menus"], "left_out": base["left_out"], "choosers": choosers}, notes


def _cell(r: dict) -> str:
    if r["median"] is None:
        return "-"
    n = sum(v is not None for v in r["seeds"].values())
    return (f"{r['median']:.3f}x [{r['range'][0]:.3f}, {r['range'][1]:.3f}]"
            + ("" if n == len(r["seeds"]) else f" ({n} of {len(r['seeds'])} seeds)"))


def phase_table(a) -> None:
    from dataset.evaluate.scorecard import chooser_table, left_out_line
    from lowering.measure.machine import machine_label
    out = Path(a.out)
    split = write_split(a)
    train, test = data_folders(a)
    data = {p.name: folder_counts(p) for p in [test, *train] if (p / "stats.json").exists()}
    census = _read_json(out / "training_examples.json")
    menus = heldout_menus(test)
    measured = split_bars(split) | {"held-out menus that tell choosers apart": menus["non_trivial"],
                                    "programs of those menus": menus["programs"]}
    if census:
        measured |= {"training examples": census["examples"], "programs of the training examples": census["programs"]}
    comparison, notes = evaluation_rows(out, a.answers)
    progs = heldout_programs(a)
    rows = search_results(a, progs)
    wins = versus_random(rows)
    report = {"machine": machine_label(TARGET), "target": TARGET,
              "options": {k: getattr(a, k) for k in ("test_fraction", "menu_size", "prompt_tokens", "strategies",
                                                     "per_program", "depth", "walks", "program_time_limit", "examples",
                                                     "max_steps", "answers", "budget", "algorithms", "policies",
                                                     "seeds")},
              "split": {k: split[k] for k in ("rule", "seed", "test_fraction", "families", "programs")},
              "bars": {name: {"measured": measured[name], "bar": bar, "met": measured[name] >= bar}
                       for name, bar in BARS.items() if name in measured},
              "data": data, "training_examples": census, "heldout_menus": menus,
              "training": _read_json(out / "tuned" / "summary.json"),
              "untuned": _read_json(out / "untuned" / "summary.json"),
              "evaluation": comparison or None, "evaluation_notes": notes,
              "kernel_menu_evaluation": "not evaluated: dataset.evaluate asks menu and single-step prompts only",
              "search": rows, "search_versus_random": wins, "loads": _read_json(out / "loads.json") or []}
    _write_json(out / "report.json", report)
    m = report["machine"]
    lines = ["# Does the model learn from every timing? SmolLM2 tuned on timed questions", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['threads']} threads; target {TARGET}.", "",
             f"Split by operator family (test fraction {a.test_fraction}): held out "
             f"{', '.join(split['families']['test'])} ({len(split['programs']['test'])} programs); trained on "
             f"{', '.join(split['families']['train'])} ({len(split['programs']['train'])} programs).", "",
             "## Bars", "", *[f"- {line}" for line in bar_lines(measured)], ""]
    if data:
        kinds = list(example_files())
        lines += ["## Data", "", "| dataset | programs | left out | " + " | ".join(kinds) + " |",
                  "|---" * (3 + len(kinds)) + "|"]
        lines += [f"| {name} | {c['programs']} | {c['left_out']} | "
                  + " | ".join(str(c["examples"][k]) for k in kinds) + " |" for name, c in data.items()]
        lines.append("")
    tr = report["training"]
    if tr:
        sft = tr["stages"]["sft"]
        lines += [f"Training: {sft['rows'] - sft['left_out_too_long']} examples ({', '.join(tr['job']['examples'])}; "
                  f"{sft['left_out_too_long']} too long), {sft.get('steps')} optimiser steps, {tr['job']['method']}, "
                  f"final loss {sft.get('final_loss')}, on {tr.get('device')}. The untuned control: "
                  f"{'exported' if report['untuned'] else 'not exported'} through the same f16 writer.", ""]
    if comparison:
        lines += ["## Held-out menus", "", chooser_table(comparison), "", left_out_line(comparison), "",
                  *[f"- {n}" for n in notes], f"Kernel rows: {report['kernel_menu_evaluation']}.", ""]
    for alg in a.algorithms:
        mine = [r for r in rows if r["algorithm"] == alg]
        if not any(r["median"] is not None for r in mine):
            continue
        lines += [f"## Search, {alg}, budget {a.budget}: confirmed speedup, median [range] over seeds "
                  f"{', '.join(map(str, a.seeds))}", "", "| program | " + " | ".join(a.policies) + " |",
                  "|---" * (1 + len(a.policies)) + "|"]
        for p in progs:
            cells = {r["policy"]: _cell(r) for r in mine if r["program"] == p.stem}
            lines.append(f"| {p.stem} | " + " | ".join(cells[pol] for pol in a.policies) + " |")
        lines += ["", "; ".join(f"{pol} matches or beats random (median, within the {TIE:.0%} noise floor) on "
                                f"{w['matches_or_beats']} of {w['programs']}" for pol, w in wins.get(alg, {}).items()), ""]
    if report["loads"]:
        lines += ["## Load averages", "", "| phase | when | 1 / 5 / 15 min |", "|---|---|---|"]
        lines += [f"| {x['phase']} | {x['when']} ({x['at']}) | {' / '.join(map(str, x['load']))} |"
                  for x in report["loads"]]
    from engine.leir.files import write_atomic
    write_atomic(out / "report.md", "\n".join(lines) + "\n")
    say("\n".join(lines))


PHASES = {"data": phase_data, "train": phase_train, "eval": phase_eval, "search": phase_search, "table": phase_table}


def _list(text: str, flag: str, choices=None, kind=str) -> list:
    try:
        items = list(dict.fromkeys(kind(x.strip()) for x in text.split(",") if x.strip()))
    except ValueError:
        raise LeirError(f"{flag}: not a comma list of numbers: {text!r}") from None
    bad = [x for x in items if choices is not None and x not in choices]
    if bad or not items:
        raise LeirError(f"{flag}: {'unknown ' + repr(bad[0]) if bad else 'nothing given'}"
                        + (f" (choose from {', '.join(choices)})" if choices else ""))
    return items


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/finetune")
    ap.add_argument("--phase", choices=(*PHASES, "all"), default="all")
    ap.add_argument("--test-fraction", type=float, default=0.3,
                    help="share of the operator families held out (default 0.3: 21 corpus programs held out, 78 "
                         "trained on)")
    ap.add_argument("--train-data", nargs="+", help="existing dataset folders of the training programs")
    ap.add_argument("--test-data", help="an existing dataset folder of the held-out programs")
    ap.add_argument("--menu-size", type=int, default=6)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                    help="strategy set of the questions, in the data and in every search (default the search's)")
    ap.add_argument("--depth", type=int, default=1,
                    help="data phase: rows from states up to D-1 verified steps from each program (dataset.generate "
                         "--depth; default 1)")
    ap.add_argument("--walks", type=int, default=1, help="data phase: walks per program with --depth > 1 (default 1)")
    ap.add_argument("--per-program", type=int, default=1,
                    help="data phase: rewrites verified and timed per state besides its questions (dataset.generate "
                         "--per-program; the walks go on from these rows: with 1, a second walk finds the only one taken)")
    ap.add_argument("--program-time-limit", type=float, default=1200,
                    help="data phase: seconds one program's task may take (dataset.generate; default 1200)")
    ap.add_argument("--examples", default="kernel_menu,pairwise,pointwise,menu",
                    help="train phase: the kinds trained on (dataset.train --examples)")
    ap.add_argument("--max-steps", type=int, default=60)
    ap.add_argument("--grad-accum", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--lora-layers", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--answers", default="number,rank",
                    help="eval phase: dataset.evaluate --answer forms, each a run per model (default number,rank)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--programs", type=int, default=6, help="search phase: held-out programs searched")
    ap.add_argument("--algorithms", default="kernels,greedy", help="search phase: python -m search --algorithm")
    ap.add_argument("--policies", default="random,cost,untuned,tuned",
                    help="search phase: random, cost, untuned, tuned (the last two --policy llm with that model)")
    ap.add_argument("--seeds", default="0,1,2", help="search phase: seeds of every policy (the median, the range)")
    ap.add_argument("--jobs", type=int, default=1, help="search phase: searches run at once")
    return ap


def check_args(a) -> None:
    """Bad options are one-line errors (``LeirError``) before any work."""
    from dataset.train.training_examples import parse_kinds
    if not 0 < a.test_fraction < 1:
        raise LeirError(f"--test-fraction must be between 0 and 1, got {a.test_fraction}")
    for flag in ("menu_size", "prompt_tokens", "workers", "per_program", "depth", "walks", "max_steps", "grad_accum",
                 "threads", "budget", "programs", "jobs"):
        if getattr(a, flag) < 1:
            raise LeirError(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(a, flag)}")
    if a.program_time_limit < 0:
        raise LeirError(f"--program-time-limit must be at least 0, got {a.program_time_limit}")
    a.examples = ",".join(parse_kinds(a.examples))
    a.answers = _list(a.answers, "--answers", ANSWERS)
    a.algorithms = _list(a.algorithms, "--algorithms", tuple(QUESTION))
    a.policies = _list(a.policies, "--policies", tuple(POLICIES))
    a.seeds = _list(a.seeds, "--seeds", kind=int)


def _main(argv) -> int:
    a = parser().parse_args(argv)
    check_args(a)
    out = Path(a.out)
    for name, fn in PHASES.items():
        if a.phase in (name, "all"):
            note_load(out, name, "start")
            fn(a)
            note_load(out, name, "end")
    return 0


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
