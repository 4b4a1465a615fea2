"""Kernel rows (``dataset.generate --time --kernel-menu``): the kernel search's question at a slot's
kernel, answered with the measured-fastest faster move; resumed without duplicates; re-derived by
``dataset.check``. Candidates are verified on TVM for real; timings come from a scripted measurer
(speedups fixed by each candidate's renaming key, records the sequential rule re-derives), so which
move is fastest is known and the file runs in seconds."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import pytest

TWO = ("B^{4}_{tx=0}L^{32}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
       "B^{4}_{tx=0}L^{32}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];")
SCALE = ("B^{4}_{tx=0}L^{16}_{a=0}[S^{f32,g}_{tx}=S^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
         "B^{4}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}/S^{f32,g}_{tx};];")
SPEEDS = (0.6, 1.0, 1.5, 1.9)           # what the scripted measurer gives a candidate, by its key's hash
MACHINE = {"cpu": "scripted cpu", "gpu": None, "cores": 2}


def two_program():
    from engine import parse_program
    return parse_program(TWO, name="softmax_two", inputs=[{"name": "A", "dtype": "f32", "shape": [4, 32]}],
                         outputs=[{"name": "C", "dtype": "f32", "shape": [4, 32]}])


def scale_program():
    from engine import parse_program
    return parse_program(SCALE, name="rownorm_two", inputs=[{"name": "A", "dtype": "f32", "shape": [4, 16]}],
                         outputs=[{"name": "C", "dtype": "f32", "shape": [4, 16]}])


def speed_of(key: str, favourites: dict) -> float:
    if key in favourites:
        return favourites[key]
    return SPEEDS[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(SPEEDS)]


class ScriptedMeasurer:
    """``Measurer.compare`` with records made from fixed paired samples: a candidate's speedup is
    ``speed_of`` its renaming key; ``calls`` counts each (parent, candidate) pair timed."""

    def __init__(self, time_options: dict, favourites=None):
        from dataset.timing import protocol_of_options
        self.protocol = protocol_of_options(time_options)
        self.favourites = dict(favourites or {})
        self.calls: Counter = Counter()

    def record(self, speedup: float) -> dict:
        from lowering.measure.stats import record_of
        for n in range(2, self.protocol.rounds + 1):
            parent = [1.0 + 0.001 * k for k in range(n)]
            cand = [p / speedup * (1 + 0.0004 * ((3 * k) % 5)) for k, p in enumerate(parent)]
            try:
                return record_of(parent, cand, target="llvm", machine=MACHINE, protocol=self.protocol, runs=1)
            except ValueError:
                continue
        raise AssertionError(f"no sample count decides a {speedup}x candidate")

    def compare(self, parent, candidates: list, reuse: bool = True) -> list:
        from engine.leir.canonical import renaming_key
        pk = renaming_key(parent)
        out = []
        for c in candidates:
            k = renaming_key(c)
            self.calls[(pk, k)] += 1
            out.append(self.record(speed_of(k, self.favourites)))
        return out


def job_options(*extra: str) -> dict:
    from dataset.generate.driver import options_of, parser
    return options_of(parser().parse_args(["x", "-o", "unused", "--time", "--kernel-menu", *extra]))


_RUNNER: list = []


def runner_for(options: dict, favourites=None):
    """The module's one Runner (its rule engine and Verifier are the same for every option used
    here), given ``options``, a fresh scripted measurer and an empty kernel cache."""
    from dataset.generate.task import Runner
    if not _RUNNER:
        _RUNNER.append(Runner(options))
    r = _RUNNER[0]
    r.options = dict(options)
    r._measurer = ScriptedMeasurer(options["time"], favourites)
    r.kernel_cache = {"verified": {}, "timed": {}}
    return r


@pytest.fixture(scope="module", autouse=True)
def _close_runner():
    yield
    for r in _RUNNER:
        r.close()
    _RUNNER.clear()


def search_question(engine, program, index: int, seed: int = 0, prompt_tokens: int = 2000):
    """The kernel search's question at slot ``index``'s kernel, built from the search's functions
    only (as search/run.py and search/kernel_search.py build it)."""
    from search.composite import load_table, resolve
    from search.kernel_question import KernelState, candidate_move, kernel_question
    from search.kernel_slots import kernel_candidates, split
    from search.options import SearchOptions
    from search.space import Space
    options = SearchOptions(seed=seed, target="llvm", prompt_tokens=prompt_tokens, algorithm="kernels", policy="llm")
    table = resolve(options.composites, options.policy, options.algorithm)
    composites = Space(engine, load_table(table or None, [s.name for s in engine.rulebook.strategies])
                       if table is not None else None).composites
    slots = split(program)
    s = slots[index]
    return kernel_question(KernelState(program.name, index, len(slots), s.kernel, s.key),
                           [candidate_move(c, s.kernel) for c in kernel_candidates(engine, s.kernel, composites)],
                           options)


def fastest_faster(row: dict) -> dict:
    faster = [e for e in row["moves"] if e["verdict"] == "faster"]
    return max(faster, key=lambda e: e["speedup"])


# ------------------------------------------------------------------ one state, in process


def test_a_kernel_row_is_the_search_question_answered_with_the_fastest_faster_move():
    from dataset.text.kernel_menu import kernel_state_rows
    options = job_options("--kernel-moves", "5")
    r = runner_for(options)
    program = two_program()
    asked: set = set()
    rows = kernel_state_rows(r, program, 0, asked)
    assert rows, "the scripted speeds make some timed move faster at each kernel"
    for row in rows:
        q = search_question(r.engine, program, row["slot"])
        assert row["messages"][:2] == list(q.first().messages)          # byte for byte the search's request
        assert [e["key"] for e in row["moves"]] == [q.moves[i].key for i in q.order[:5]]
        best = fastest_faster(row)
        top = max(speed_of(e["key"], {}) for e in row["moves"] if e["verified"])
        assert top > 1 and row["answer_key"] == best["key"] == next(
            e["key"] for e in row["moves"] if e["verified"] and speed_of(e["key"], {}) == top)
        assert row["messages"][-1] == {"role": "assistant",
                                       "content": f"<think>{best['reason']}</think>{row['answer']}"}
        assert q.moves[q.follow(q.first(), row["answer"])[1]].key == best["key"]     # the number names it
        assert len(row["messages"]) == 3 and row["pages"] == 1
    # asked again at the same state (or a state keeping these kernels): no second row, nothing re-timed
    assert kernel_state_rows(r, program, 1, asked) == []
    assert max(r.measurer.calls.values()) == 1


def test_an_answer_beyond_the_first_page_is_the_conversation_that_reaches_it():
    """A short prompt budget: the fastest move is on a later page, reached through "more" lines."""
    from dataset.text.kernel_menu import MORE_REASON, kernel_state_rows
    program = two_program()
    options = job_options("--kernel-moves", "40", "--prompt-tokens", "450")
    probe = runner_for(options)
    q = search_question(probe.engine, program, 1, prompt_tokens=450)
    first = set(q.first().shown_moves)
    assert len(first) < len(q.moves) <= 40
    hidden = next(i for i in q.order if i not in first)
    r = runner_for(options, favourites={q.moves[hidden].key: 4.0})
    rows = [x for x in kernel_state_rows(r, program, 0, set()) if x["slot"] == 1]
    assert len(rows) == 1
    row = rows[0]
    assert row["answer_key"] == q.moves[hidden].key and row["pages"] >= 2
    path = q.path_to(hidden)
    want = list(path[0][0].messages)
    for k, (page, number) in enumerate(path):
        if k:
            want.append(page.messages[1])
        reason = MORE_REASON if k < len(path) - 1 else fastest_faster(row)["reason"]
        want.append({"role": "assistant", "content": f"<think>{reason}</think>{number}"})
    assert row["messages"] == want
    assert [m["role"] for m in row["messages"]][:3] == ["system", "user", "assistant"]


# ------------------------------------------------------------------ a job: resume, check


class InProcess:
    """A job backend running the tasks in this process with the scripted measurer; ``stop_after``:
    raise after committing that many tasks (an interrupted job)."""

    def __init__(self, stop_after=None):
        self.stop_after = stop_after

    def __call__(self, *args, **kwargs):
        return self

    def run(self, tasks, options, on_result):
        r = runner_for(options)
        for n, (tid, spec) in enumerate(tasks):
            if self.stop_after is not None and n == self.stop_after:
                raise KeyboardInterrupt("interrupted")
            on_result(tid, r.run(spec))


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.long
def test_a_kernel_job_resumes_without_duplicates_and_checks(tmp_path, monkeypatch):
    import engine.plumbing.jobs as jobs
    from dataset.check.checker import Report, check
    from dataset.check.kernel_rows import check_kernel_rows
    from dataset.generate.driver import main
    from dataset.text.kernel_menu import kernel_row_pairs
    for name, prog in (("a_softmax_two", two_program()), ("b_rownorm_two", scale_program())):
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / f"{name}.leir").write_text(prog.to_leir_file())
    out = tmp_path / "out"
    argv = [str(tmp_path / "src"), "-o", str(out), "--per-program", "2", "--depth", "2", "--time", "--kernel-menu",
            "--kernel-moves", "4", "--no-plots", "--test-fraction", "0"]
    monkeypatch.setattr(jobs, "backend", InProcess(stop_after=1))
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    assert len(list((out / ".journal" / "tasks").glob("*.json"))) == 1       # one program committed
    monkeypatch.setattr(jobs, "backend", InProcess())
    assert main(argv) == 0
    assert max(_RUNNER[0].measurer.calls.values()) == 1            # nothing timed twice in the resumed run
    rows = _lines(out / "train" / "kernel_menu.jsonl")
    assert rows and not (out / "test" / "kernel_menu.jsonl").read_text()
    journalled = [k for f in sorted((out / ".journal" / "tasks").glob("*.json"))
                  for k in json.loads(f.read_text())["kernel_menu"]]
    ids = [k["id"] for k in rows]
    assert len(ids) == len(set(ids)) == len({k["id"] for k in journalled})     # each question once
    assert {k["program"]["name"] for k in rows} == {"softmax_two", "rownorm_two"}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["depth"]["states"] > 2                          # states reached by a step were asked too
    for k in rows:
        assert k["split"] == "train" and k["answer_key"] == fastest_faster(k)["key"]
    assert any(e["composite"] and e["reason"] for k in rows for e in k["moves"])     # composite moves are checked too
    pairs = _lines(out / "train" / "preferences_kernel_menu.jsonl")
    assert pairs == [p for k in rows for p in kernel_row_pairs(k)]
    assert all(p["chosen_verdict"] == "faster" and p["rejected_verdict"] in ("slower", "tie") for p in pairs)
    assert stats["kernel_menu"]["rows"] == len(rows) and (out / "data" / "kernel_menu" / "train.parquet").exists()
    # once more: nothing to run, the same files
    before = (out / "train" / "kernel_menu.jsonl").read_text()
    assert main(argv) == 0 and (out / "train" / "kernel_menu.jsonl").read_text() == before

    report = check(out, sample=0, progress=False)
    assert not report.problems, report.problems[:5]
    assert report.counts["kernel rows"] == len(rows)

    # a tampered prompt: the whole check fails
    bad = json.loads(before.splitlines()[0])
    bad["messages"][1]["content"] += " "
    (out / "train" / "kernel_menu.jsonl").write_text("\n".join([json.dumps(bad)] + before.splitlines()[1:]) + "\n")
    assert any("not the kernel search's question" in what for _, what in check(out, sample=0, progress=False).problems)
    (out / "train" / "kernel_menu.jsonl").write_text(before)

    def problems_with(edit):
        """The kernel rows' part of the check (dataset.check.kernel_rows) with the first row edited."""
        bad = json.loads(before.splitlines()[0])
        edit(bad)
        data = {"kernel_menu.jsonl": [bad] + rows[1:], "preferences_kernel_menu.jsonl": pairs, "stats.json": stats}
        report = Report()
        check_kernel_rows(data, stats["job"], None, report, engine=_RUNNER[0].engine)
        return [what for _, what in report.problems]

    assert problems_with(lambda bad: None) == []

    def answer(bad):
        other = next(e for e in bad["moves"] if e["key"] != bad["answer_key"])
        bad["answer_key"], bad["answer"], bad["label"] = other["key"], other["number"], other["label"]
    assert any("the answer is not" in p for p in problems_with(answer))

    def timing(bad):
        e = next(e for e in bad["moves"] if e["timing"])
        e["timing"]["verdict"] = e["verdict"] = "faster" if e["verdict"] != "faster" else "slower"
    assert any("verdict" in p for p in problems_with(timing))

    def steps(bad):
        e = next(e for e in bad["moves"] if e["key"] == bad["answer_key"])
        e["steps"][-1]["site"] = [9] + e["steps"][-1]["site"][1:]
    assert problems_with(steps)


def test_kernel_menu_options_need_time_and_are_checked(tmp_path):
    from engine.leir.diagnostics import LeirError
    from dataset.generate.driver import main
    src = tmp_path / "p.leir"
    src.write_text(two_program().to_leir_file())
    for extra, message in ((["--kernel-menu"], "--kernel-menu needs --time"),
                           (["--kernel-moves", "3"], "--kernel-moves sets how many moves of a kernel are timed"),
                           (["--time", "--kernel-menu", "--kernel-moves", "0"], "--kernel-moves must be at least 1"),
                           (["--prompt-tokens", "300"], "use it with --menu or --kernel-menu")):
        with pytest.raises(LeirError, match=re.escape(message)):
            main([str(src), "-o", str(tmp_path / "o"), *extra])
    # --prompt-tokens is the kernel question's budget too; the moves default to the first page's
    assert job_options("--prompt-tokens", "300")["kernel_menu"] == {"prompt_tokens": 300, "moves": None}
    from dataset.generate.task import fingerprint
    assert "kernel_menu" not in fingerprint({"kernel_menu": False}) and fingerprint(job_options())["kernel_menu"]
