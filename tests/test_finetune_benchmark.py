"""benchmarks/finetune.py, the experiment "does the model learn from every timing", with its project
commands replaced by fakes that write what each command writes (``run`` monkeypatched): the family
split (disjoint, deterministic), the flags of every phase, the untuned control's export, the
question the data and the searches ask, and that a rerun skips what is finished."""
import hashlib
import importlib.util
import json
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def finetune():
    spec = importlib.util.spec_from_file_location("finetune_bench", ROOT / "benchmarks" / "finetune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flag(cmd: list, name: str):
    cmd = [str(c) for c in cmd]
    assert name in cmd, f"{name} missing from {cmd}"
    return cmd[cmd.index(name) + 1]


def values(cmd: list, name: str) -> list[str]:
    """The values of a flag that takes several (up to the next flag)."""
    cmd = [str(c) for c in cmd]
    out = []
    for c in cmd[cmd.index(name) + 1:]:
        if c.startswith("-"):
            break
        out.append(c)
    return out


def options(fb, tmp_path, *extra):
    a = fb.parser().parse_args(["--out", str(tmp_path / "ft"), *map(str, extra)])
    fb.check_args(a)
    return a


def _entry(number, speedup, ci):
    return {"number": number, "key": f"k{number}", "strategy": "loop_split", "speedup": speedup, "verified": True,
            "verdict": "faster" if ci[0] > 1.02 else "slower" if ci[1] < 1 / 1.02 else "tie",
            "timing": {"ci": ci, "noise_floor": 0.02}}


class Commands:
    """Fakes of the project commands: each writes the files its command writes, from its arguments."""

    def __init__(self, fail_on=None):
        self.ran = []
        self.fail_on = fail_on          # (module, n): the n-th command of that module is killed

    def __call__(self, cmd, log, env=None):
        cmd = [str(c) for c in cmd]
        module = cmd[1]
        self.ran.append(cmd)
        if self.fail_on and self.fail_on[0] == module and sum(c[1] == module for c in self.ran) == self.fail_on[1]:
            raise KeyboardInterrupt("killed")          # as kill -9 leaves it: nothing written
        getattr(self, module.replace(".", "_"))(cmd)

    def of(self, module):
        return [c for c in self.ran if c[1] == module]

    def dataset_generate(self, cmd):
        src, dest = Path(cmd[2]), Path(flag(cmd, "-o"))
        names = [json.loads(x)["name"] for x in src.read_text().splitlines()]
        files = {"menu.jsonl": [], "kernel_menu.jsonl": [], "pairwise.jsonl": [], "pointwise.jsonl": []}
        for i, n in enumerate(names):
            # every program: a menu that tells choosers apart; every other one also a one-entry menu
            files["menu.jsonl"].append({"id": f"{n}-m", "split": "train", "program": {"name": n},
                                        "messages": [{"role": "user", "content": f"menu of {n}"},
                                                     {"role": "assistant", "content": "<think>r</think>1"}],
                                        "menu": [_entry(1, 1.5, [1.4, 1.6]), _entry(2, 0.8, [0.75, 0.85])],
                                        "answer": 1})
            if i % 2:
                files["menu.jsonl"].append({"id": f"{n}-one", "split": "train", "program": {"name": n},
                                            "messages": [{"role": "user", "content": "q"},
                                                         {"role": "assistant", "content": "1"}],
                                            "menu": [_entry(1, 1.2, [1.1, 1.3])], "answer": 1})
            files["kernel_menu.jsonl"] += [{"id": f"{n}-k{j}", "program": {"name": n}} for j in range(2)]
            files["pairwise.jsonl"] += [{"id": f"{n}-p{j}", "program": n} for j in range(3)]
            files["pointwise.jsonl"].append({"id": f"{n}-y", "program": n})
        for name, rows in files.items():
            (dest / "train").mkdir(parents=True, exist_ok=True)
            (dest / "train" / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        (dest / "stats.json").write_text(json.dumps({
            "job": {"sources": [{"name": src.name, "sha256": hashlib.sha256(src.read_bytes()).hexdigest()}]},
            "sources": {"tasks": len(names), "programs": len(names), "skipped": {}}}))

    def dataset_train(self, cmd):
        out = Path(flag(cmd, "-o"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "train.json").write_text("{}")
        (out / "model.gguf").write_bytes(b"GGUF")
        job = {"export_base": True} if "--export-base" in cmd else {"examples": flag(cmd, "--examples").split(","),
                                                                     "method": "lora"}
        stages = {} if "--export-base" in cmd else {"sft": {"rows": 10, "left_out_too_long": 1, "steps": 3,
                                                            "final_loss": 0.5}}
        (out / "summary.json").write_text(json.dumps({"job": job, "stages": stages, "device": {"device": "cpu"}}))

    def dataset_evaluate(self, cmd):
        from dataset.evaluate.comparison import RANDOM, compare
        from dataset.evaluate.items import menu_items
        from dataset.evaluate.menu_facts import Pick, menu_facts
        facts = [menu_facts(it) for it in menu_items(Path(cmd[2]), flag(cmd, "--split"), "")]
        model = flag(cmd, "--model")
        pick = 1 if model == "tuned" else 2          # the tuned model picks the fast entry, the untuned the slow one
        comparison = compare(facts, {model: [Pick(pick)] * len(facts), "random": RANDOM}) | {"model": model}
        out = Path(flag(cmd, "-o"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"menu": {"comparison": comparison}, "unfinished": 0}))

    def search(self, cmd):
        seed, policy = int(flag(cmd, "--seed")), flag(cmd, "--policy")
        model = flag(cmd, "--model") if policy == "llm" else None
        speedup = {"random": 1.1, "cost": 1.3}.get(policy) or {"tuned": 1.5, "untuned": 1.0}[model]
        out = Path(flag(cmd, "-o"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"complete": True, "best": {"speedup": speedup + seed / 10}}))


@pytest.fixture
def fake(monkeypatch):
    fb = finetune()
    commands = Commands()
    servers = []

    @contextmanager
    def server(gguf, alias, log, threads):
        servers.append((Path(gguf), alias))
        yield f"http://127.0.0.1:1/{alias}/v1"

    monkeypatch.setattr(fb, "run", commands)
    monkeypatch.setattr(fb, "llama_server", server)
    return fb, commands, servers


def test_the_split_holds_out_whole_families_deterministically(tmp_path):
    from dataset.families import family
    fb = finetune()
    rows = fb.corpus_rows()
    split = fb.family_split(rows, 0.3)
    assert split == fb.family_split(rows, 0.3)
    test = {p["name"] for p in split["programs"]["test"]}
    train = {p["name"] for p in split["programs"]["train"]}
    assert not test & train and test | train == {r["name"] for r in rows}
    assert not {family(n) for n in test} & {family(n) for n in train}          # no family on both sides
    assert set(split["families"]["test"]) == {family(n) for n in test}
    assert len(test) >= 15 and len(train) >= 60                               # the default meets the bar
    # a smaller fraction holds out a subset of the families (one ranking, cut earlier)
    assert set(fb.family_split(rows, 0.1)["families"]["test"]) < set(split["families"]["test"])
    a = options(fb, tmp_path)
    first = fb.write_split(a)
    files = sorted((tmp_path / "ft").rglob("*.json*"))
    before = {p: p.read_bytes() for p in files}
    assert fb.write_split(a)["chunks"] == first["chunks"]
    assert {p: p.read_bytes() for p in files} == before                        # byte for byte the same
    chunked = [json.loads(x)["name"] for c in first["chunks"] for x in c.read_text().splitlines()]
    assert sorted(chunked) == sorted(train) and max(len(c.read_text().splitlines()) for c in first["chunks"]) <= 20
    held = [json.loads(x)["name"] for x in (tmp_path / "ft" / "sources" / "test.jsonl").read_text().splitlines()]
    assert set(held) == test
    assert json.loads((tmp_path / "ft" / "split.json").read_text())["families"] == split["families"]


def test_bad_options_are_one_line_errors(tmp_path, capsys):
    fb = finetune()
    for bad, says in ((["--test-fraction", "1"], "--test-fraction must be between 0 and 1"),
                      (["--policies", "random,best"], "--policies: unknown 'best'"),
                      (["--answers", "name"], "--answers: unknown 'name'"),
                      (["--examples", "menu,chat"], "--examples: unknown kind 'chat'"),
                      (["--seeds", "0,x"], "--seeds: not a comma list of numbers")):
        assert fb.main(["--out", str(tmp_path / "ft"), *bad]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "ft").exists()


def test_the_data_and_the_searches_ask_the_same_question(tmp_path, fake):
    """Each search algorithm asks what the data phase's rows ask: the kernel search the kernel rows'
    question, greedy the menu rows' (options parsed by each command's own parser)."""
    from dataset.generate.driver import kernel_menu_options, menu_options, parser
    from dataset.text import kernel_menu, menu
    from search.__main__ import build_parser
    from search.composite import resolve
    from search.options import options_from_args
    fb, commands, _ = fake
    a = options(fb, tmp_path, "--menu-size", 5, "--prompt-tokens", 900, "--strategies", "paper", "--depth", 2,
                "--walks", 3)
    gen = [str(c) for c in fb.generate_cmd(tmp_path / "src.jsonl", tmp_path / "ds", a)]
    g = parser().parse_args(gen[2:])
    asked = {"greedy": menu.search_options({"seed": g.seed, "target": g.target, "menu": menu_options(g)}),
             "kernels": kernel_menu.search_options({"seed": g.seed, "target": g.target,
                                                    "kernel_menu": kernel_menu_options(g)})}
    assert g.time and g.menu and g.kernel_menu and (g.depth, g.walks, g.strategies) == (2, 3, "paper")
    for algorithm, q in asked.items():
        for policy in ("random", "cost", "llm"):
            cmd = fb.search_cmd(tmp_path / "p.json", tmp_path / "t.json", algorithm, policy, 1, a,
                                "http://127.0.0.1:1/v1" if policy == "llm" else None, "tuned")
            s = options_from_args(build_parser().parse_args([str(c) for c in cmd[2:]]))
            assert (s.algorithm, s.policy, s.budget, s.seed) == (algorithm, policy, 16, 1)
            assert (s.prompt_tokens, s.menu_detail, s.target, s.strategies) == (q.prompt_tokens, q.menu_detail,
                                                                                  q.target, g.strategies)
            if algorithm == "greedy":
                assert s.menu_size == q.menu_size == 5
            # the same moves shown: composite moves where the question shows them, none where it does not
            assert resolve(s.composites, s.policy, s.algorithm) == resolve(q.composites, q.policy, q.algorithm), \
                (algorithm, policy)
    assert asked["kernels"].prompt_tokens == 900


def test_the_data_phase_makes_every_chunk_and_a_rerun_skips_the_finished_ones(tmp_path, fake, capsys):
    fb, _, _ = fake
    a = options(fb, tmp_path, "--program-time-limit", 600)
    killed = Commands(fail_on=("dataset.generate", 3))     # the third chunk is killed while it runs
    fb.run = killed
    with pytest.raises(KeyboardInterrupt):
        fb.phase_data(a)
    first = [Path(flag(c, "-o")).name for c in killed.of("dataset.generate")]
    assert first == ["ds-test", "ds-train0", "ds-train1"]
    for cmd in killed.ran:
        assert {"--time", "--menu", "--kernel-menu", "--shrink"} <= set(cmd)
        assert (flag(cmd, "--program-time-limit"), flag(cmd, "--test-fraction")) == ("600.0", "0")
    again = Commands()
    fb.run = again
    fb.phase_data(a)
    assert [Path(flag(c, "-o")).name for c in again.of("dataset.generate")] == ["ds-train1", "ds-train2", "ds-train3"]
    out = capsys.readouterr().out
    assert "data: chunk 2/5 train0: complete before (20 programs, 0 left out; examples: menu 30," in out
    assert "data: chunk 3/5 train1: started (20 programs)" in out and "data: chunk 5/5 train3: finished (18 " in out
    # a chunk killed while its files move into place is made again (dataset.generate re-assembles it)
    (tmp_path / "ft" / "ds-train2" / ".journal" / "staging").mkdir(parents=True)
    third = Commands()
    fb.run = third
    fb.phase_data(a)
    assert [Path(flag(c, "-o")).name for c in third.of("dataset.generate")] == ["ds-train2"]
    # a folder made from other programs is refused, never counted as this chunk
    src = tmp_path / "ft" / "sources" / "train0.jsonl"
    stats = tmp_path / "ft" / "ds-train0" / "stats.json"
    stats.write_text(stats.read_text().replace(hashlib.sha256(src.read_bytes()).hexdigest(), "0" * 64))
    with pytest.raises(fb.LeirError, match="holds a dataset of other programs"):
        fb.phase_data(a)


def test_train_counts_the_examples_and_exports_the_untuned_control(tmp_path, fake, capsys):
    fb, commands, _ = fake
    a = options(fb, tmp_path)
    fb.phase_data(a)
    fb.phase_train(a)
    untuned, tuned = commands.of("dataset.train")
    assert "--export-base" in untuned and Path(flag(untuned, "-o")) == tmp_path / "ft" / "untuned"
    assert not any(str(tmp_path / "ft" / "ds-") in c for c in untuned)          # no dataset: the base model
    assert flag(tuned, "--examples") == "kernel_menu,pairwise,pointwise,menu"
    assert [Path(p).name for p in values(tuned, "dataset.train")] == ["ds-train0", "ds-train1", "ds-train2",
                                                                      "ds-train3"]
    census = json.loads((tmp_path / "ft" / "training_examples.json").read_text())
    # 78 training programs: 1.5 menu rows, 2 kernel rows, 3 pairwise and 1 pointwise example each
    assert census["kinds"] == {"kernel_menu": {"examples": 156, "programs": 78},
                               "pairwise": {"examples": 234, "programs": 78},
                               "pointwise": {"examples": 78, "programs": 78},
                               "menu": {"examples": 117, "programs": 78}}
    assert (census["examples"], census["programs"]) == (585, 78)
    out = capsys.readouterr().out
    assert "train: training examples: 585 (bar 1,000: NOT met)" in out
    assert "train: programs of the training examples: 78 (bar 60: met)" in out
    fb.phase_train(a)                                       # both finished: nothing runs again
    assert len(commands.of("dataset.train")) == 2
    (tmp_path / "ft" / "tuned" / "summary.json").unlink()   # killed before its end: resumed
    fb.phase_train(a)
    assert commands.of("dataset.train")[-1][-1] == "--resume" and len(commands.of("dataset.train")) == 3


def test_eval_compares_both_models_in_both_answer_forms(tmp_path, fake, capsys):
    fb, commands, servers = fake
    a = options(fb, tmp_path)
    with pytest.raises(fb.LeirError, match="no finished untuned model"):
        fb.phase_eval(a)
    fb.phase_data(a)
    fb.phase_train(a)
    fb.phase_eval(a)
    assert servers == [(tmp_path / "ft" / "untuned" / "model.gguf", "untuned"),
                       (tmp_path / "ft" / "tuned" / "model.gguf", "tuned")]
    evals = commands.of("dataset.evaluate")
    assert [(flag(c, "--model"), flag(c, "--answer")) for c in evals] == [
        ("untuned", "number"), ("untuned", "rank"), ("tuned", "number"), ("tuned", "rank")]
    for c in evals:
        assert Path(c[2]) == tmp_path / "ft" / "ds-test"
        assert (flag(c, "--split"), flag(c, "--kind")) == ("all", "menu") and "--no-baselines" not in c
        assert [Path(p).name for p in values(c, "--train-data")] == ["ds-train0", "ds-train1", "ds-train2",
                                                                     "ds-train3"]
        assert flag(c, "--endpoint") == f"http://127.0.0.1:1/{flag(c, '--model')}/v1"
    menus = json.loads((tmp_path / "ft" / "heldout_menus.json").read_text())
    # 21 held-out programs: one menu each that tells choosers apart, 10 one-entry menus left out
    assert menus == {"folder": "ds-test", "menus": 31, "non_trivial": 21, "programs": 21,
                     "left_out": {"one entry": 10}}
    out = capsys.readouterr().out
    assert "eval: held-out menus that tell choosers apart: 21 (bar 100: NOT met)" in out
    assert "eval: programs of those menus: 21 (bar 15: met)" in out
    fb.phase_eval(a)
    assert len(commands.of("dataset.evaluate")) == 4 and len(servers) == 2      # finished: not asked again


def test_search_runs_every_policy_seed_and_algorithm_and_the_table_reports_them(tmp_path, fake):
    from dataset.families import family
    fb, commands, servers = fake
    a = options(fb, tmp_path)
    for phase in ("data", "train", "eval", "search"):
        fb.PHASES[phase](a)
    progs = fb.heldout_programs(a)
    split = json.loads((tmp_path / "ft" / "split.json").read_text())
    assert len(progs) == 6 and {family(p.stem) for p in progs} == set(split["families"]["test"])
    runs = commands.of("search")
    assert len(runs) == 2 * 6 * 4 * 3
    seen = {(flag(c, "--algorithm"), Path(c[2]).stem, flag(c, "--policy"),
             flag(c, "--model") if "--model" in c else None, flag(c, "--seed")) for c in runs}
    assert seen == {(alg, p.stem, pol, model, str(seed)) for alg in ("kernels", "greedy") for p in progs
                    for pol, model in (("random", None), ("cost", None), ("llm", "untuned"), ("llm", "tuned"))
                    for seed in (0, 1, 2)}
    assert all(flag(c, "--budget") == "16" for c in runs)
    assert [c for c in runs if "--model" in c] == [c for c in runs if flag(c, "--policy") == "llm"]
    assert servers[-2:] == [(tmp_path / "ft" / "untuned" / "model.gguf", "untuned"),
                            (tmp_path / "ft" / "tuned" / "model.gguf", "tuned")]
    # an interrupted search (its checkpoint not complete) is run again, the finished ones are not
    traj = tmp_path / "ft" / "search" / "kernels" / f"{progs[0].stem}-cost-1.json"
    traj.write_text(json.dumps({"complete": False}))
    fb.phase_search(a)
    assert len(commands.of("search")) == 145 and flag(commands.of("search")[-1], "-o") == str(traj)
    fb.main(["--out", str(tmp_path / "ft"), "--phase", "table"])
    report = json.loads((tmp_path / "ft" / "report.json").read_text())
    row = next(r for r in report["search"] if (r["algorithm"], r["program"], r["policy"]) ==
               ("greedy", progs[0].stem, "tuned"))
    assert row["seeds"] == {"0": 1.5, "1": 1.6, "2": 1.7} and row["median"] == 1.6 and row["range"] == [1.5, 1.7]
    assert report["search_versus_random"]["kernels"] == {"cost": {"matches_or_beats": 6, "programs": 6},
                                                         "untuned": {"matches_or_beats": 0, "programs": 6},
                                                         "tuned": {"matches_or_beats": 6, "programs": 6}}
    choosers = report["evaluation"]["choosers"]
    assert choosers["SmolLM2 tuned (number)"]["top1"] == 1.0 and choosers["SmolLM2 untuned (rank)"]["top1"] == 0.0
    assert report["evaluation"]["menus"] == 21 and "random" in choosers
    assert report["bars"]["training examples"] == {"measured": 585, "bar": 1000, "met": False}
    assert report["target"] == "llvm" and report["machine"]["cores"] >= 1
    assert [(x["phase"], x["when"]) for x in report["loads"]][-1] == ("table", "start")
    md = (tmp_path / "ft" / "report.md").read_text()
    assert f"| {progs[0].stem} | 1.200x [1.100, 1.300] | 1.400x [1.300, 1.500] | 1.100x [1.000, 1.200] | " \
           "1.600x [1.500, 1.700] |" in md
    assert "tuned matches or beats random (median, within the 2% noise floor) on 6 of 6" in md


def test_the_default_strategies_are_the_searchs(tmp_path):
    from search.features import DEFAULT_STRATEGIES
    fb = finetune()
    seen = {}
    fb.PHASES = {"table": lambda a: seen.setdefault("a", a)}
    fb.main(["--out", str(tmp_path), "--phase", "table"])
    assert seen["a"].strategies == DEFAULT_STRATEGIES
