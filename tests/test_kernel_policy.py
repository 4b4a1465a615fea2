"""The policy inside the kernel search: the kernel question (pages that drop nothing), each
policy's choice among a kernel's moves, a larger budget making the smaller one's choices first,
and random choosing among what a model is shown."""
from __future__ import annotations

import json

import pytest
from test_kernels import SMALL_SOFTMAX, TableVerifier, parse
from test_search_llm import FakeLLM

from search.kernel_question import KernelMove, KernelQuestion, KernelState


def state(key="k0"):
    from search.kernel_slots import split
    return KernelState("small_softmax", 0, 3, split(parse(SMALL_SOFTMAX))[0].kernel, key)


def moves(n: int, labels=("loop_tiling", "loop_split", "loop_reorder", "reduction_vectorization")) -> list:
    return [KernelMove(f"key{i:04d}", labels[i % len(labels)], json.dumps([0, i % 3]),
                       f"{labels[i % len(labels)]} (loop=a, factor={i}): L^{{{i}}}_{{a=0}}…") for i in range(n)]


def every_page(q: KernelQuestion):
    """Every page reachable from the first, with the moves it shows."""
    seen, todo, out = set(), [q.first()], []
    while todo:
        p = todo.pop()
        ident = (p.level, p.subset, tuple(ln.text for ln in p.lines))
        if ident in seen:
            continue
        seen.add(ident)
        out.append(p)
        for n, ln in enumerate(p.lines, 1):
            if ln.move is None:
                todo.append(q.follow(p, n)[1])
    return out


def test_a_kernel_whose_moves_fit_is_asked_in_one_page():
    q = KernelQuestion(state(), moves(12))
    p = q.first()
    assert sorted(p.shown_moves) == list(range(12)) and all(ln.move is not None for ln in p.lines)
    text = p.messages[1]["content"]
    assert "kernel 1 of 3" in text and "more" not in text.split("**Task**")[1]
    assert p.tokens() <= 2000


def test_more_moves_than_fit_drill_down_by_strategy_and_reach_every_move():
    """Nothing is dropped: the first page shows at least 30 moves within the budget, and a line per
    strategy not wholly shown; following those lines reaches every move, each page within budget."""
    q = KernelQuestion(state(), moves(400), budget=2000)
    first = q.first()
    assert len(first.shown_moves) >= 30 and first.tokens() <= 2000 and first.chars() <= 8000
    more = [ln for ln in first.lines if ln.move is None]
    assert more and all(ln.text.startswith("more ") for ln in more)
    assert {q.moves[first.lines[0].move].label} <= {"loop_tiling", "loop_split", "loop_reorder",
                                                   "reduction_vectorization"}
    pages = every_page(q)
    assert all(p.tokens() <= 2000 for p in pages)
    reached = {m for p in pages for m in p.shown_moves}
    assert reached == set(range(400))
    for m in (0, 7, 399):                       # the conversation that chooses a move ends on it
        path = q.path_to(m)
        page = q.first()
        for i, (p, n) in enumerate(path):
            assert p.messages == page.messages
            kind, nxt = q.follow(p, n)
            if i == len(path) - 1:
                assert (kind, nxt) == ("move", m)
            else:
                page = nxt


def test_the_question_is_deterministic_and_ignores_the_order_moves_are_given_in():
    ms = moves(120)
    a = KernelQuestion(state(), ms, seed=3).first().messages
    b = KernelQuestion(state(), list(reversed(ms)), seed=3).first().messages
    c = KernelQuestion(state(), ms, seed=4).first().messages
    assert a == b and a != c


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper,extra")


def test_the_bundled_kernels_first_questions_show_thirty_moves_within_the_budget(engine):
    """Each slot of the bundled attention and softmax: every move of the kernel, or at least 30 of
    them, in a question of at most 2,000 estimated tokens and 8,000 characters."""
    from engine import load_program
    from engine.leir.canonical import renaming_key
    from search.kernel_question import candidate_move
    from search.kernel_slots import kernel_candidates, split
    from pathlib import Path
    ROOT = Path(__file__).resolve().parent.parent
    for name in ("attention", "softmax"):
        program = load_program(ROOT / "examples" / f"{name}.leir")
        slots = split(program)
        for i, sl in enumerate(slots):
            found = kernel_candidates(engine, sl.kernel)
            q = KernelQuestion(KernelState(name, i, len(slots), sl.kernel, renaming_key(sl.kernel)),
                               [candidate_move(c, sl.kernel) for c in found])
            p = q.first()
            assert len(p.shown_moves) >= min(30, len(found)), (name, i)
            assert p.tokens() <= 2000 and p.chars() <= 8000, (name, i, p.tokens(), p.chars())


# ---------------------------------------------------------------------- policies in the search


def options(**kw):
    from search import SearchOptions
    base = dict(algorithm="kernels", policy="cost", budget=12, confirm=0, min_repeat_ms=0.2, repeat=3, trials=1,
                kernel_nodes=300, composites="off")    # composite moves: tests/test_kernels.py (seconds each)
    base.update(kw)
    return SearchOptions(**base)


def run(engine, **kw):
    from search import run_search
    program = parse(SMALL_SOFTMAX)
    return run_search(program, options(**kw), engine=engine, verifier=TableVerifier(program),
                      progress=lambda m: None).record


def chosen(rec) -> list[dict]:
    return [s for s in rec["samples"] if s["kind"] == "kernel" and s.get("choice")]


@pytest.mark.parametrize("policy", ["cost", "random", "measure"])
def test_every_policy_chooses_the_kernel_moves_it_is_asked_for(engine, policy):
    rec = run(engine, policy=policy, budget=14)
    picks = chosen(rec)
    assert picks and all(s["choice"]["policy"] == policy for s in picks)
    assert all(s["choice"]["moves"] >= 1 for s in picks)
    assert rec["summary"]["samples"] <= 14
    state = rec["summary"]["policy"]
    if policy == "random":
        assert state["shown"] == state["menu"] >= len(picks)    # a kernel's question reaches every move


def test_random_choices_depend_on_the_seed_and_measure_screens_strategies(engine):
    a = [s["key"] for s in chosen(run(engine, policy="random", seed=0))]
    b = [s["key"] for s in chosen(run(engine, policy="random", seed=1))]
    assert a != b
    m = chosen(run(engine, policy="measure", budget=14))
    first = [s["kernel_steps"][-1]["strategy"] for s in m if len(s["kernel_steps"]) == 1][:4]
    assert len(set(first)) == len(first)          # strategies take turns before any is measured twice


def test_a_users_policy_class_is_loaded_by_its_path(engine):
    from engine.leir.diagnostics import LeirError
    rec = run(engine, policy="search.policies.random:RandomPolicy")
    assert all(s["choice"]["policy"] == "search.policies.random:RandomPolicy" for s in chosen(rec))
    with pytest.raises(LeirError, match="cannot load policy 'nowhere.mod:Policy'"):
        options(policy="nowhere.mod:Policy").validate()
    with pytest.raises(LeirError, match="not a subclass"):
        options(policy="search.options:SearchOptions").validate()
    with pytest.raises(LeirError, match="llm-free writes whole programs"):
        options(policy="llm-free", endpoint="http://x/v1", model="m").validate()


def test_a_larger_budget_makes_the_smaller_ones_choices_first(engine):
    """With the same timings, the run at 32 samples makes the 16-sample run's samples first (its
    composition included, as the 16th sample), so its result is never worse."""
    small, large = run(engine, budget=16), run(engine, budget=32)
    key = lambda s: (s["kind"], s.get("key"), s.get("status"))  # noqa: E731
    assert [key(s) for s in large["samples"][:16]] == [key(s) for s in small["samples"]]
    assert small["samples"][-1]["kind"] == "composed" or small["best"]["steps"] == []
    assert large["best"]["speedup"] >= small["best"]["speedup"] - 1e-9


def test_the_llm_policy_drills_down_and_its_choice_is_measured(engine):
    """A model that answers a "more" line, then a move: the move of that page is the one measured,
    both calls are recorded with the page's lines, and the first request is the kernel question."""
    def responder(body):
        text = body["messages"][1]["content"]
        lines = [ln for ln in text.splitlines() if ln[:1].isdigit() and ". " in ln]
        more = [ln.split(".")[0] for ln in lines if ln.split(". ", 1)[1].startswith("more ")]
        return ("text", more[0] if more else lines[-1].split(".")[0])

    with FakeLLM(responder=responder) as srv:
        rec = run(engine, policy="llm", endpoint=srv.url, model="fake", budget=8, prompt_tokens=700,
                  constraint="none")
    picks = chosen(rec)
    assert picks, rec["samples"]
    first = picks[0]
    calls = [c for c in rec["llm_calls"] if "kernel" in c]
    assert len(first["choice"]["pages"]) >= 2 and first["choice"]["call"] == calls[len(first["choice"]["pages"]) - 1][
        "index"]
    page1, page2 = calls[0], calls[1]
    assert any("more" in ln for ln in page1["kernel"]["lines"]) and page2["kernel"]["page"] == 2
    assert "The legal moves of the current kernel" in page1["messages"][1]["content"]
    assert first["key"] in {ln.get("key") for ln in calls[len(first["choice"]["pages"]) - 1]["kernel"]["lines"]}


def test_a_kernel_search_whose_every_choice_failed_at_the_model_says_why(engine):
    """Every move asked of the model failed: the run says so (python -m search then exits 1), the
    kernels it timed alone are not the policy's samples."""
    from search.__main__ import model_failure
    with FakeLLM(responder=lambda body: ("text", "not a number")) as srv:
        rec = run(engine, policy="llm", endpoint=srv.url, model="fake", budget=12, retries=0, constraint="none")
    failed = [s for s in rec["samples"] if s["kind"] == "failed answer"]
    assert failed and all(s["status"] == "parse failed" for s in failed)
    why = model_failure(rec["samples"])
    assert why and f"every one of the {len(failed)} sample(s) failed at the model" in why
    assert model_failure(run(engine, policy="random", budget=12)["samples"]) is None


def test_random_in_the_papers_algorithms_draws_from_what_the_model_is_shown(engine):
    """Greedy + random draws among the entries the llm policy would show (within the prompt
    budget), and records how many that was against the whole menu; random-all draws from all."""
    from search import run_search
    program = parse(SMALL_SOFTMAX)
    v = TableVerifier(program)
    rec = run_search(program, options(algorithm="greedy", policy="random", budget=4, prompt_tokens=900),
                     engine=engine, verifier=v, progress=lambda m: None).record
    menu = [s for s in rec["samples"] if s["kind"] == "menu"]
    assert menu and all(s["drawn_from"] < s["menu"] for s in menu)
    st = rec["summary"]["policy"]
    assert st["drawn_from"] == "shown entries" and st["shown"] < st["menu"]
    rec = run_search(program, options(algorithm="greedy", policy="random-all", budget=4, prompt_tokens=900),
                     engine=engine, verifier=v, progress=lambda m: None).record
    assert all(s["drawn_from"] == s["menu"] for s in rec["samples"] if s["kind"] == "menu")


def test_a_larger_budget_confirms_the_smaller_ones_result(engine):
    """The run at 32 confirms, beside its own best, the node the 16-sample run confirmed."""
    small, large = run(engine, budget=16, confirm=1), run(engine, budget=32, confirm=1)
    keys = {n["id"]: n["key"] for n in large["nodes"]}
    confirmed = {keys[c["node"]] for c in large["best"]["confirmations"]}
    assert small["best"]["key"] in confirmed or small["best"]["steps"] == []
    assert large["best"]["speedup"] >= small["best"]["speedup"] - 1e-9
