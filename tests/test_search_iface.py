"""Issue 21 items 6 and 4: policies see a narrow context (never the run), generate/observe/choose,
one options registry for the CLI, one evaluation database, Step objects inside the search (JSON
at the trajectory), multi-step candidates, budget-aware ``measure`` and ``cost``, old
trajectories still replay."""
import json
import math
from types import SimpleNamespace

import pytest
from conftest import ROOT
from test_search_llm import FakeLLM, free_responder_factory, menu_responder, tiny_program

FIXTURE = ROOT / "tests" / "data" / "search" / "trajectory_v1_main.json"   # written by main before issue 21


def options(**kw):
    from search import SearchOptions
    base = dict(budget=3, confirm=1, min_repeat_ms=0.2, repeat=3, trials=2, screen=2, rollout_depth=1)
    base.update(kw)
    return SearchOptions(**base)


# ---------------------------------------------------------------- the narrow interface

def test_policies_never_hold_the_run():
    src = "".join(p.read_text() for p in (ROOT / "search" / "policies").glob("*.py"))
    assert "self.run" not in src and ".run." not in src
    from search.context import Budget
    spent = [0]
    b = Budget(3, lambda: spent[0])
    assert (b.left, b.exhausted) == (3, False)
    spent[0] = 3
    assert (b.left, b.spent, b.exhausted) == (0, 3, True)
    spent[0] = 5                                       # never negative
    assert b.left == 0


def test_cli_flags_come_from_the_options_registry():
    from dataclasses import fields

    from search.__main__ import build_parser
    from search.algorithms import ALGORITHMS
    from search.options import SearchOptions, options_from_args
    from search.policies import POLICIES
    ap = build_parser()
    by_dest = {a.dest: a for a in ap._actions}
    d = SearchOptions()
    for f in fields(SearchOptions):
        if f.name == "extra":
            assert f.name not in by_dest
            continue
        assert by_dest[f.name].default == getattr(d, f.name), f.name
    assert list(by_dest["algorithm"].choices) == list(ALGORITHMS)
    assert by_dest["policy"].choices is None              # a user's package.module:Class too, checked by validate
    assert all(p in by_dest["policy"].help for p in POLICIES)
    a = ap.parse_args(["p.leir", "-o", "t.json", "--cost-db", "db.jsonl", "--screen-share", "0.5", "--budget", "9"])
    o = options_from_args(a)
    assert (o.database, o.cost_db, o.screen_share, o.budget) == ("db.jsonl", "db.jsonl", 0.5, 9)
    assert ap.parse_args(["p.leir", "-o", "t.json", "--database", "x"]).database == "x"
    # options of an older trajectory: missing fields take their defaults, cost_db is the database
    old = json.loads(FIXTURE.read_text())["options"]
    assert "screen_share" not in old and "cost_db" in old
    back = SearchOptions.from_json(dict(old, cost_db="old.jsonl"))
    assert back.database == "old.jsonl" and back.screen_share == d.screen_share and back.budget == old["budget"]
    # so --resume (and the batch) take an older trajectory's options as today's same flags, but for the
    # build it timed: the exact one (written before builds were named), which it resumes with --build exact
    assert SearchOptions.from_json(old).build == "exact" and d.build == "fast"
    same = SearchOptions(**{k: v for k, v in old.items() if k != "cost_db"}, build="exact")
    assert SearchOptions.from_json(old).to_json() == same.to_json()
    from engine.leir.diagnostics import LeirError
    with pytest.raises(LeirError, match="--screen-share"):
        SearchOptions(screen_share=0.0).validate()


# ---------------------------------------------------------------- the database

def test_database_appends_tolerates_a_torn_line_and_keys_by_original_target_machine(tmp_path):
    from search.costmodel import CostModel
    from search.run_database import RunDatabase
    from search.features import FEATURES_VERSION, PROGRAM_FEATURES
    path = tmp_path / "db.jsonl"
    m = {"cpu": "x", "gpu": None, "cores": 2}
    db = RunDatabase(str(path), machine=m)
    n = len(PROGRAM_FEATURES)
    feats = {"version": FEATURES_VERSION, "program_features": [0.5] * (2 * n), "path_strategies": ["a"],
             "log_speedup": 0.3, "label": "parent"}
    db.add_original("r1", "orig", "llvm", {"median_ms": 1.0})
    db.add_outcome("r1", "orig", "llvm", "p", {"key": "k1", "status": "accepted", "speedup": 1.35}, feats)
    db.add_outcome("r1", "orig", "llvm", "p", {"key": "k2", "status": "not equal"})
    db.add_outcome("r2", "other", "llvm", "q", {"key": "k3", "status": "accepted"})
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(l)["kind"] in ("original", "outcome") for l in lines)
    with open(path, "a") as f:                       # a writer killed mid-line
        f.write('{"kind": "outcome", "run": "r1", "key": "k9"')
    again = RunDatabase(str(path), machine=m)
    assert again.torn == 1 and len(again.records) == 4
    assert set(again.outcomes("orig", "llvm")) == {"k1", "k2"}
    assert again.outcomes("orig", "cuda") == {} and set(again.outcomes("other", "llvm", run="r2")) == {"k3"}
    assert RunDatabase(str(path), machine=dict(m, cores=8)).outcomes("orig", "llvm") == {}   # another machine
    assert again.baseline("orig", "llvm", "r1") == {"median_ms": 1.0}
    again.add_outcome("r1", "orig", "llvm", "p", {"key": "k4", "status": "accepted"})    # after the torn line
    assert set(RunDatabase(str(path), machine=m).outcomes("orig", "llvm")) == {"k1", "k2", "k4"}
    # the cost model's rows: outcomes with features labelled over their parent; an older --cost-db
    # row (labelled over the original, no label) is left out
    legacy = {k: v for k, v in dict(feats, program="p", original="orig", key="k0", target="llvm").items()
              if k != "label"}
    with open(path, "a") as f:
        f.write(json.dumps(legacy) + "\n")
    db3 = RunDatabase(str(path), machine=m)
    assert [r.get("key") for r in db3.cost_rows()] == ["k1"]
    assert [r.get("key") for r in db3.cost_rows(exclude_run="r1")] == []
    model = CostModel(("a", "b"))
    assert model.load(str(path)) == 1                 # CostModel.load reads the same file
    assert model.rows[0][0][-2:] == [1.0, 0.0]


def test_resume_from_the_database_alone_redoes_no_sample(engine, verifier, tmp_path):
    from search.run_database import RunDatabase
    from search.run import run_search
    db = tmp_path / "db.jsonl"
    opts = options(algorithm="greedy", policy="random", budget=3, confirm=0, database=str(db))
    first = run_search(tiny_program(), opts, engine=engine, verifier=verifier, progress=lambda m: None).record
    lines = db.read_text().splitlines()
    kinds = [json.loads(x)["kind"] for x in lines]
    assert kinds.count("original") + kinds.count("outcome") == 1 + first["summary"]["samples"]
    assert kinds.count("timing") >= 1                         # the paired timings are cached in it too
    again = run_search(tiny_program(), opts, engine=engine, verifier=verifier, progress=lambda m: None,
                       resume={}).record
    assert again["original"] == first["original"]                           # the baseline from the database
    assert [s["outcome"] for s in again["samples"]] == [s["outcome"] for s in first["samples"]]
    assert db.read_text().splitlines() == lines                              # nothing committed twice
    assert RunDatabase(str(db)).records[-1]["kind"] == "outcome"


# ---------------------------------------------------------------- budget-aware policies

def test_measure_screen_follows_the_budget_left():
    from search.policies.measure import screen_width
    assert screen_width(16, 0.25, 2, 6, 40) == 4
    assert screen_width(64, 0.25, 2, 6, 40) == 6          # --screen caps it
    assert screen_width(3, 0.25, 2, 6, 40) == 2           # at least the proposals wanted
    assert screen_width(1, 0.25, 2, 6, 40) == 1           # never past the budget
    assert screen_width(16, 0.25, 2, 6, 3) == 3           # nor the menu
    assert screen_width(0, 0.25, 2, 6, 40) == 0
    for left in range(0, 30):
        assert screen_width(left, 0.25, 2, 6, 40) <= left


def test_measure_policy_screens_a_share_of_the_budget(engine, verifier):
    from search.run import run_search
    rec = run_search(tiny_program(), options(algorithm="greedy", policy="measure", budget=8, screen=6,
                                             iterations=1, per_node=1),
                     engine=engine, verifier=verifier, progress=lambda m: None).record
    assert len(rec["samples"]) == math.ceil(8 * 0.25)     # not the 6 of --screen


class _Model:
    """A stand-in cost model with fixed predictions (log speedups) per menu number."""

    strategies = ("s",)
    ready = True

    def __init__(self, scores):
        self.scores = scores

    def predict(self, xs):
        return [self.scores[int(x[0])] for x in xs]


def _cost_policy(scores, explore=0.0, margin=0.02):
    from search.options import SearchOptions
    from search.policies.cost import CostPolicy
    ctx = SimpleNamespace(engine=SimpleNamespace(strategies=("s",)), database=None, program=None, root=None)
    p = CostPolicy(SearchOptions(policy="cost", explore=explore, cost_margin=margin), ctx)
    p.model = _Model(scores)
    p._x = lambda program, key, state, moves: [float(key)]
    return p


def _menu(n):
    from search.space import Candidate
    out = []
    for i in range(n):
        st = SimpleNamespace(strategy="s", exactness="bitwise", program=None)
        out.append(Candidate(i + 1, st, str(i)))
    return out


def test_cost_policy_measures_only_predicted_winners():
    from search.policies.base import Request
    node = SimpleNamespace(speedup=1.5, path=())
    menu = _menu(5)
    bar = math.log(1.02)              # predicted speedup over the node (the quantity the search decides on)
    scores = [bar - 0.5, bar + 0.3, bar - 0.01, bar + 0.1, bar - 1.0]
    got = _cost_policy(scores).generate(Request(node, None, menu, 4, "greedy"))
    assert [p.candidate.number for p in got] == [2, 4]                       # the two predicted to win
    # nothing predicted to win: the single best prediction, tagged as the exploration rule
    scores = [bar - 0.5, bar - 0.3, bar - 0.01, bar - 0.1, bar - 1.0]
    pol = _cost_policy(scores)
    got = pol.generate(Request(node, None, menu, 4, "greedy"))
    assert [(p.candidate.number, p.extra["pick"]) for p in got] == [(3, "best-guess")]
    assert pol.picks["best-guess"] == 1 and pol.withheld == 3


POLICIES = ("random", "measure", "cost", "llm", "llm-free")


@pytest.mark.parametrize("policy", POLICIES)
def test_no_policy_exceeds_a_tiny_budget(policy, engine, verifier):
    from search.run import run_search
    prog = tiny_program()
    responder = menu_responder if policy == "llm" else free_responder_factory(prog)
    with FakeLLM(responder=responder) as srv:
        extra = dict(endpoint=srv.url, model="fake", llm_timeout=10.0, retries=1) if policy.startswith("llm") else {}
        for budget, alg in ((1, "mcts"), (2, "beam")):
            rec = run_search(prog, options(algorithm=alg, policy=policy, budget=budget, per_node=3, screen=6,
                                           screen_share=1.0, rollout_depth=2, confirm=0, **extra),
                             engine=engine, verifier=verifier, progress=lambda m: None).record
            assert 1 <= len(rec["samples"]) <= budget, (policy, alg, len(rec["samples"]))
            assert rec["summary"]["curve"][-1][0] == len(rec["samples"])


# ---------------------------------------------------------------- Step objects, multi-step candidates, replay

def test_a_two_step_candidate_becomes_one_edge_that_replays(engine, verifier, tmp_path):
    from engine import renaming_key
    from engine.rewrite.steps import Step
    from search.policies.base import Policy, Proposal
    from search.run import Run
    from search.space import Candidate, Node

    class TwoSteps(Policy):
        name = "two-steps"

        def generate(self, req):
            first = next(c for c in req.menu if c.step.strategy == "loop_split")
            mid = Node(-1, first.program, first.key, None, 0, strategy="loop_split")
            second = next(s for s in self.ctx.engine.enumerate(mid.program) if s.strategy == "loop_reorder")
            c = Candidate(0, second, renaming_key(second.program), steps=(first.step, second), name="split+reorder")
            return [Proposal(candidate=c)]

    out = tmp_path / "t.json"
    run = Run(tiny_program(), options(policy="random", budget=2, confirm=0), engine=engine, verifier=verifier,
              out=str(out), progress=lambda m: None)
    try:
        run.policy = TwoSteps(run.options, run.context)
        root = run.start()
        kids = run.expand(root, 1)
        assert len(kids) == 1
        kid = kids[0]
        assert kid.depth == 2 and len(kid.steps) == 2 and all(isinstance(s, Step) for s in kid.path)
        assert [s.strategy for s in kid.steps] == ["loop_split", "loop_reorder"] and kid.strategy == "loop_reorder"
        run.stop("test")
        run.finish()
    finally:
        run.close()
    rec = json.loads(out.read_text())
    node = rec["nodes"][1]
    assert [s["strategy"] for s in node["steps"]] == ["loop_split", "loop_reorder"]
    assert len(rec["samples"]) == 1 and len(rec["samples"][0]["steps"]) == 2
    assert rec["samples"][0]["strategy"] == "split+reorder"
    q = tiny_program()
    for st in node["steps"]:
        q = engine.apply(q, st)
    assert q.to_leir() == node["leir"]
    assert rec["samples"][0]["status"] == "accepted" and node["verdict"] in ("faster", "slower", "tie")
    assert node["ratio"] > 0 and node["ci"][0] <= node["ratio"] <= node["ci"][1]
    # the best is the node only when it is significantly faster than the original
    assert (rec["best"]["node"], len(rec["best"]["steps"])) == ((1, 2) if rec["best"]["significant"] else (0, 0))


def test_a_trajectory_written_before_issue_21_still_reproduces(engine):
    """Fast: the old file loads, its best steps and every node's edges re-apply byte for byte."""
    from search.trajectory import load_trajectory
    rec = load_trajectory(str(FIXTURE)).record
    original = load_trajectory(str(FIXTURE)).program
    assert len(rec["best"]["steps"]) >= 2
    assert any(len(n["steps"]) > 1 for n in rec["nodes"])          # a rollout edge: several steps
    q = original
    for st in rec["best"]["steps"]:
        q = engine.apply(q, st)
    assert q.to_leir() == rec["best"]["leir"]
    for n in rec["nodes"][1:]:
        path, cur = [], n
        while cur["parent"] is not None:
            path = cur["steps"] + path
            cur = rec["nodes"][cur["parent"]]
        q = original
        for st in path:
            q = engine.apply(q, st)
        assert q.to_leir() == n["leir"]


@pytest.mark.slow
def test_a_trajectory_written_before_issue_21_still_replays_with_the_cli():
    """Slow (a verifier process, timings): ``python -m search.replay`` on the old file."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "search.replay", str(FIXTURE), "--json", "--rounds", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    got = json.loads(r.stdout)
    assert r.returncode == 0 and got["reproduced"] and got["equal"] and got["steps"] >= 2, r.stderr


def test_outputs_go_into_a_folder_that_does_not_exist_yet(tmp_path):
    """``-o out/run.json`` on a fresh checkout: the folder is made, the file written whole."""
    from engine.leir.files import write_atomic
    target = tmp_path / "out" / "deeper" / "run.json"
    write_atomic(target, "{}\n")
    assert target.read_text() == "{}\n" and [p.name for p in target.parent.iterdir()] == ["run.json"]
