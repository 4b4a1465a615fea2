"""Every timed candidate teaches (issue 39, item 1): pairwise ("which of two is faster"), pointwise ("is it
faster than its parent") and preference examples from every menu and kernel menu a ``--time`` job timed,
those with no faster entry included; re-derived by ``dataset.check``; read by ``dataset.train
--examples``. Candidates are verified on TVM for real; timings come from a scripted measurer (records the
sequential rule re-derives), under which nothing of the program ``rownorm_two`` is ever faster: its
questions give no menu or kernel row, only these examples."""
from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from tests.test_dataset_kernel_menu import (
    _RUNNER,
    ScriptedMeasurer,
    runner_for,
    scale_program,
    two_program,
)

SLOW = (0.6, 1.0)           # what a candidate of a rownorm parent measures (never faster)
NAMES = ("pairwise.jsonl", "pointwise.jsonl", "preferences_pairwise.jsonl")


# ------------------------------------------------------------------ the decisive rule, on fixed records


def entry(key, ci, verdict, number=None, floor=0.02):
    speedup = (ci[0] + ci[1]) / 2
    return {"key": key, "label": f"s_{key}", "text": f"move {key}", "steps": [], "number": number, "verified": True,
            "speedup": speedup, "ci": list(ci), "verdict": verdict, "timing": {"noise_floor": floor}}


def record(entries, form="kernel"):
    return {"id": "q1", "form": form, "program": {"name": "p", "inputs": [], "outputs": [], "leir": "x"},
            "depth": 0, "slot": 0 if form == "kernel" else None,
            "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "H\n\nlist"}],
            "header": "H", "entries": entries, "split": "train"}


@pytest.mark.parametrize("a,b,decisive", [
    ((1.3, 1.5, "faster"), (0.7, 0.9, "slower"), True),       # faster against slower: always
    ((1.03, 1.2, "faster"), (0.99, 1.02, "tie"), False),      # 1.03 is not above 1.02 by the floor
    ((1.10, 1.2, "faster"), (0.99, 1.02, "tie"), True),
    ((1.5, 1.6, "faster"), (1.2, 1.3, "faster"), True),       # both faster, apart by more than the floor
    ((1.3, 1.5, "faster"), (1.2, 1.35, "faster"), False),     # overlapping intervals
    ((1.30, 1.5, "faster"), (1.2, 1.28, "faster"), False),    # apart, but by less than the floor
    ((0.99, 1.01, "tie"), (0.5, 0.9, "slower"), True),
    ((0.9, 1.2, "tie"), (0.85, 0.96, "slower"), False),       # a wide tie overlaps the slower one
])
def test_a_pair_is_decisive_when_the_intervals_lie_apart_by_the_noise_floor(a, b, decisive):
    from dataset.text.pairwise import faster_of
    ea, eb = entry("a", a[:2], a[2]), entry("b", b[:2], b[2])
    assert faster_of(ea, eb) is (ea if decisive else None)
    assert faster_of(eb, ea) is (ea if decisive else None)      # the same whichever comes first


def test_examples_of_a_menu_are_capped_seeded_and_shuffled():
    from dataset.text.pairwise import PAIRS_PER_MENU, examples_of
    es = [entry(f"k{i}", (0.5 + 0.3 * i, 0.55 + 0.3 * i), "faster" if i > 2 else "slower" if i < 2 else "tie",
                number=i + 1) for i in range(8)]
    rec = record(es)
    got, n = examples_of(rec, 0)
    assert n["decisive_pairs"] == 28 and len(got["pairwise.jsonl"]) == PAIRS_PER_MENU == n["pairwise"]
    assert examples_of(rec, 0)[0] == got                                     # same record and seed: same examples
    assert examples_of(rec, 1)[0]["pairwise.jsonl"] != got["pairwise.jsonl"]  # the choice and order are seeded
    by_key = {e["key"]: e for e in es}
    for ex in got["pairwise.jsonl"]:
        a, b = (by_key[k] for k in ex["keys"])
        assert ex["answer"] == ("1" if a["speedup"] > b["speedup"] else "2")
        assert ex["messages"][1]["content"].startswith("H\n\nTwo legal moves") and \
            f"1. {a['text']}\n2. {b['text']}" in ex["messages"][1]["content"]
    # pointwise: faster -> yes, slower -> no, the tie left out and counted
    assert [(x["key"], x["answer"]) for x in got["pointwise.jsonl"]] == \
        [("k0", "no"), ("k1", "no")] + [(f"k{i}", "yes") for i in range(3, 8)]
    assert n["pointwise_ties_left_out"] == 1
    # preference pairs: the same pairs, on the question's own request, chosen the faster entry's number
    prefs = got["preferences_pairwise.jsonl"]
    assert [{p["chosen_key"], p["rejected_key"]} for p in prefs] == [set(x["keys"]) for x in got["pairwise.jsonl"]]
    for p in prefs:
        assert p["prompt"] == rec["messages"] and by_key[p["chosen_key"]]["speedup"] > \
            by_key[p["rejected_key"]]["speedup"]
        assert p["chosen"] == [{"role": "assistant", "content": str(by_key[p["chosen_key"]]["number"])}]
    # a move the question's first page does not show is in no preference pair (its number is not on the page)
    es[7]["number"] = None
    assert all("k7" not in (p["chosen_key"], p["rejected_key"])
               for p in examples_of(record(es), 0)[0]["preferences_pairwise.jsonl"])


# ------------------------------------------------------------------ one real job


class RownormSlow(ScriptedMeasurer):
    """The kernel tests' scripted speeds, except that a candidate of a rownorm parent (a program or
    kernel writing ``S``) is never faster."""

    def compare(self, parent, candidates: list, reuse: bool = True) -> list:
        from engine.leir.canonical import renaming_key
        if "S^{f32" not in parent.to_leir():
            return super().compare(parent, candidates, reuse)
        out = []
        for c in candidates:
            k = renaming_key(c)
            self.calls[(renaming_key(parent), k)] += 1
            out.append(self.record(SLOW[int(hashlib.sha256(k.encode()).hexdigest(), 16) % len(SLOW)]))
        return out


class Backend:
    """The job's tasks in this process, with the scripted measurer."""

    def __call__(self, *args, **kwargs):
        return self

    def run(self, tasks, options, on_result):
        r = runner_for(options)
        r._measurer = RownormSlow(options["time"])
        for tid, spec in tasks:
            on_result(tid, r.run(spec))


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A --time --menu --kernel-menu job on two programs: (out folder, argv, the runner's engine)."""
    import engine.plumbing.jobs as jobs
    from dataset.generate.driver import main
    tmp = tmp_path_factory.mktemp("pairwise")
    (tmp / "src").mkdir()
    for name, prog in (("a_softmax_two", two_program()), ("b_rownorm_two", scale_program())):
        (tmp / "src" / f"{name}.leir").write_text(prog.to_leir_file())
    out = tmp / "out"
    argv = [str(tmp / "src"), "-o", str(out), "--per-program", "2", "--time", "--menu", "--menu-size", "6",
            "--kernel-menu", "--kernel-moves", "4", "--no-plots", "--test-fraction", "0"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jobs, "backend", Backend())
        assert main(argv) == 0
        yield out, argv, _RUNNER[0].engine
    for r in _RUNNER:
        r.close()
    _RUNNER.clear()


def test_every_timed_menu_gives_examples_whose_answers_follow_from_its_timings(job):
    out, argv, _engine = job
    timed = _lines(out / "timed_menus.jsonl")
    assert {(t["form"], t["program"]["name"]) for t in timed} == {
        (f, p) for f in ("kernel", "menu") for p in ("softmax_two", "rownorm_two")}
    # rownorm's questions were timed and have no faster entry: no menu or kernel row, examples all the same
    rows = _lines(out / "train" / "menu.jsonl") + _lines(out / "train" / "kernel_menu.jsonl")
    assert rows and {r["program"]["name"] for r in rows} == {"softmax_two"}
    slow = {t["id"] for t in timed if t["program"]["name"] == "rownorm_two"}
    assert all(e["verdict"] != "faster" for t in timed if t["id"] in slow for e in t["entries"])
    ex = {name: _lines(out / "train" / name) for name in NAMES}
    assert all(ex.values()) and not any(_lines(out / "test" / name) for name in NAMES)
    assert {x["question"] for x in ex["pairwise.jsonl"]} & slow and {x["question"] for x in ex["pointwise.jsonl"]} & slow
    assert {x["form"] for x in ex["pairwise.jsonl"]} == {"kernel", "menu"}
    entries = {(t["id"], e["key"]): e for t in timed for e in t["entries"]}
    floor = json.loads((out / "stats.json").read_text())["job"]["time"]["noise_floor"]
    for x in ex["pairwise.jsonl"]:
        a, b = (entries[(x["question"], k)] for k in x["keys"])
        faster = "1" if a["ci"][0] > b["ci"][1] * (1 + floor) else "2" if b["ci"][0] > a["ci"][1] * (1 + floor) else None
        assert x["answer"] == faster and x["messages"][-1] == {"role": "assistant", "content": faster}
        assert [x["speedups"], x["cis"], x["verdicts"]] == [[e[f] for e in (a, b)] for f in ("speedup", "ci", "verdict")]
        assert f"1. {a['text']}\n2. {b['text']}" in x["messages"][1]["content"]
    assert {x["answer"] for x in ex["pairwise.jsonl"]} == {"1", "2"}             # the order carries no label
    for x in ex["pointwise.jsonl"]:
        e = entries[(x["question"], x["key"])]
        assert x["answer"] == {"faster": "yes", "slower": "no"}[e["verdict"]] == x["messages"][-1]["content"]
    assert {x["answer"] for x in ex["pointwise.jsonl"]} == {"yes", "no"}
    for p in ex["preferences_pairwise.jsonl"]:
        c, r = entries[(p["question"], p["chosen_key"])], entries[(p["question"], p["rejected_key"])]
        assert c["ci"][0] > r["ci"][1] * (1 + floor)
        assert p["chosen"][0]["content"] == str(c["number"]) and p["rejected"][0]["content"] == str(r["number"])
        assert p["prompt"] == next(t["messages"] for t in timed if t["id"] == p["question"])
    stats = json.loads((out / "stats.json").read_text())["timed_menus"]
    ties = sum(1 for e in entries.values() if e["verdict"] == "tie")
    assert stats["menus"] == len(timed) and stats["pairwise"] == len(ex["pairwise.jsonl"]) and \
        stats["pointwise_ties_left_out"] == ties > 0
    for config in ("pairwise", "pointwise", "preferences_pairwise"):
        assert (out / "data" / config / "train.parquet").exists()
        assert f"config_name: {config}" in (out / "README.md").read_text()
    # the same job again (everything journalled, assembled anew): byte-identical files
    from dataset.generate.driver import main
    before = {p: p.read_bytes() for name in NAMES for p in [out / "train" / name]}
    before[out / "timed_menus.jsonl"] = (out / "timed_menus.jsonl").read_bytes()
    assert main(argv) == 0
    assert all(p.read_bytes() == b for p, b in before.items())


def test_the_check_rederives_the_examples_and_refuses_a_corrupted_one(job):
    from dataset.check.checker import Report, check
    from dataset.check.timed_menus import check_examples, check_timed_menus
    out, _argv, engine = job
    report = check(out, sample=0, progress=False)
    assert not report.problems, report.problems[:5]
    assert report.counts["timed menus"] == len(_lines(out / "timed_menus.jsonl"))
    assert report.counts["pairwise examples"] == len(_lines(out / "train" / "pairwise.jsonl"))
    stats = json.loads((out / "stats.json").read_text())
    options = stats["job"]
    data = {"timed_menus.jsonl": _lines(out / "timed_menus.jsonl"), "stats.json": stats,
            **{name: _lines(out / "train" / name) for name in NAMES}}

    def problems(edit, archive=False):
        d = json.loads(json.dumps(data))
        edit(d)
        r = Report()
        if archive:
            check_timed_menus(d, options, None, r, engine=engine)
        else:
            check_examples(d, d["timed_menus.jsonl"], options, r)
        return [f"{w}: {p}" for w, p in r.problems]

    assert problems(lambda d: None) == []

    def flip(d):
        x = d["pairwise.jsonl"][0]
        x["answer"] = x["messages"][-1]["content"] = "2" if x["answer"] == "1" else "1"
    assert any("answer does not follow from the timings" in p for p in problems(flip))

    def pointwise_tie(d):           # an example of a tied entry: no timed menu gives it
        t = next(t for t in d["timed_menus.jsonl"] if any(e["verdict"] == "tie" for e in t["entries"]))
        e = next(e for e in t["entries"] if e["verdict"] == "tie")
        x = dict(d["pointwise.jsonl"][0], id="forged", question=t["id"], key=e["key"], verdict="faster")
        d["pointwise.jsonl"].append(x)
    assert any("pointwise.jsonl" in p and "no timed menu gives this example" in p for p in problems(pointwise_tie))

    def undecisive(d):              # a pair whose intervals are not apart, offered as a preference
        p = d["preferences_pairwise.jsonl"][0]
        p["chosen_key"], p["rejected_key"] = p["rejected_key"], p["chosen_key"]
    assert any("preferences_pairwise.jsonl:1" in p and "chosen_key" in p for p in problems(undecisive))

    def retimed(d):                 # a timing whose verdict its samples do not give
        e = next(e for t in d["timed_menus.jsonl"] for e in t["entries"] if e["verdict"] == "slower")
        e["verdict"] = e["timing"]["verdict"] = "faster"
    assert any("timing verdict is faster, its samples give slower" in p for p in problems(retimed, archive=True))


def test_dataset_train_reads_the_new_kinds_and_refuses_bad_ones(job, tmp_path, capsys):
    from dataset.train.trainer import main
    from dataset.train.training_examples import pair_examples, parse_kinds, sft_examples
    out, _argv, _engine = job
    n = {name: len(_lines(out / "train" / name)) for name in NAMES}
    got = sft_examples([str(out)], "train", "number", parse_kinds("pairwise,pointwise"))
    assert len(got) == n["pairwise.jsonl"] + n["pointwise.jsonl"]
    assert Counter(x["completion"][0]["content"] for x in got).keys() == {"1", "2", "yes", "no"}
    assert all(x["prompt"][-1]["role"] == "user" for x in got)
    menus = sft_examples([str(out)], "train", "number")              # the default: the menu rows, as before
    assert len(menus) == len(_lines(out / "train" / "menu.jsonl"))
    pairs = pair_examples([str(out)], "train", "number", ("pairwise", "pointwise"))
    assert len(pairs) == n["preferences_pairwise.jsonl"] and all(p["prompt"][0]["role"] == "system" for p in pairs)
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    for extra, message in ((["--examples", "menu,nope"], "--examples: unknown kind 'nope'"),
                           (["--examples", "pointwise", "--dpo"], "--dpo: pointwise examples have no preference pairs")):
        rc = main([str(out), "-o", str(tmp_path / "o"), "--base", str(base), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()
