"""Per-statement kernels (search.kernel_slots), the e-graph of choices (search.egraph) and the
``kernels`` algorithm (search.kernel_search): splitting, composing, mapping kernel steps back,
extraction without enumerating the product, and a small end-to-end run that replays."""
import pytest
from conftest import EXAMPLES

LINEAR_BIAS = """program linear
input  A f32[4, 8]
input  J f32[6, 8]
input  K f32[6]
output C f32[4, 6]

B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*J^{f32,g}_{a,c};];
B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+K^{f32,g}_{a};];
B^{4}_{tx=0}L^{6}_{a=0}[G^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}*2.0;];
"""

SMALL_SOFTMAX = """program small_softmax
input  A f32[4, 64]
output C f32[4, 64]

B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];
B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
"""


def load(name):
    from engine import load_program
    return load_program(str(EXAMPLES / name))


def parse(text):
    from engine import parse_program
    return parse_program(text)


def decls(ds):
    return [(d.name, d.dtype, tuple(d.shape)) for d in ds]


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper")


# ---------------------------------------------------------------------- splitting


def test_split_softmax_kernels_read_intermediates_as_inputs():
    from search.kernel_slots import split
    slots = split(load("softmax.leir"))
    assert [(s.start, s.stop) for s in slots] == [(0, 1), (1, 2), (2, 3)]
    assert [(decls(s.kernel.inputs), decls(s.kernel.outputs)) for s in slots] == [
        ([("A", "f32", (32, 1024))], [("D", "f32", (32,))]),
        ([("A", "f32", (32, 1024)), ("D", "f32", (32,))], [("E", "f32", (32,))]),
        ([("A", "f32", (32, 1024)), ("D", "f32", (32,)), ("E", "f32", (32,))], [("C", "f32", (32, 1024))]),
    ]
    # the reductions keep their implicit initialisation: their tensor is the kernel's output
    assert [e.eq.init for s in slots for e in s.kernel.info.equations] == ["-inf", "0", None]


def test_split_attention_six_kernels():
    from search.kernel_slots import split
    slots = split(load("attention.leir"))
    assert [(s.start, s.stop) for s in slots] == [(i, i + 1) for i in range(6)]
    got = [([d.name for d in s.kernel.inputs], decls(s.kernel.outputs)) for s in slots]
    assert got == [
        (["A", "C"], [("F", "f32", (4, 64, 64))]),
        (["F"], [("J", "f32", (4, 64, 64))]),
        (["J"], [("G", "f32", (4, 64))]),
        (["J", "G"], [("H", "f32", (4, 64))]),
        (["J", "G", "H"], [("I", "f32", (4, 64, 64))]),
        (["D", "I"], [("E", "f32", (4, 64, 32))]),
    ]


def test_in_place_update_joins_the_earlier_writer():
    """The bias add updates C in place (no init: C was written before, leir.md 7.3), so it is
    never isolated: it shares one kernel with the matmul that wrote C."""
    from search.kernel_slots import split
    slots = split(parse(LINEAR_BIAS))
    assert [(s.start, s.stop) for s in slots] == [(0, 2), (2, 3)]
    first = slots[0].kernel
    assert decls(first.outputs) == [("C", "f32", (4, 6))]       # read by the last statement
    assert [e.eq.init for e in first.info.equations] == ["0", None]


@pytest.mark.parametrize("name", ["softmax.leir", "attention.leir", "layernorm.leir", "conv2d.leir"])
def test_compose_of_split_is_the_original(name):
    from search.kernel_slots import compose, split
    p = load(name)
    slots = split(p)
    assert compose(p, slots, {}).to_leir() == p.to_leir()
    # each slot's own body put back gives the same text too
    assert compose(p, slots, {i: s.kernel.body for i, s in enumerate(slots)}).to_leir() == p.to_leir()


def test_local_and_cross_statement_steps(engine):
    from search.kernel_slots import local_slot, split
    p = load("softmax.leir")
    slots = split(p)
    by = {}
    for s in engine.enumerate(p):
        by.setdefault(s.strategy, []).append(local_slot(p, s.program, slots))
    assert set(by["loop_split"]) == {0, 1, 2}                    # one statement each
    assert by["online_softmax"] == [None]                       # fuses two statements
    assert set(by["set_storage_layout"]) == {None}               # a tensor's layout: all its statements


# ---------------------------------------------------------------------- mapping back


def test_kernel_steps_replay_on_the_whole_program(engine):
    """A kernel variant two steps deep, mapped onto the whole program, gives the same slot."""
    from search.kernel_slots import map_steps, slot_key, split
    from engine.leir.canonical import renaming_key
    p = load("softmax.leir")
    slot = split(p)[2]
    first = next(s for s in engine.enumerate(slot.kernel) if s.strategy == "loop_split")
    second = next(s for s in engine.enumerate(first.program) if s.strategy == "loop_reorder")
    recs = [first.provenance(), second.provenance()]
    keys = [renaming_key(first.program), renaming_key(second.program)]
    whole, path, how = map_steps(engine, p, slot, slot.kernel, recs, keys)
    assert how == "exact" and len(path) == 2
    assert slot_key(whole, 2, 3, slot.kernel) == keys[-1]
    assert whole.body[:2] == p.body[:2]
    again = p
    for st in path:
        again = engine.apply(again, st)
    assert again.to_leir() == whole.to_leir()


def test_kernel_step_with_a_taken_name_is_re_derived(engine):
    """A kernel's fresh tensor name may be taken in the whole program: the step is found again
    in the whole program's enumeration (same slot modulo renaming), and it replays."""
    from engine.leir.canonical import renaming_key
    from search.kernel_slots import map_steps, slot_key, split
    p = load("attention.leir")
    slot = split(p)[2]                      # G = max over J: the prefix-max step names a new tensor
    step = next(s for s in engine.enumerate(slot.kernel) if s.strategy == "normal_loop_max_to_prefix_max")
    key = renaming_key(step.program)
    whole, path, how = map_steps(engine, p, slot, slot.kernel, [step.provenance()], [key])
    assert how in ("exact", "re-derived")
    assert slot_key(whole, 2, 2 + len(step.program.body), slot.kernel) == key
    assert engine.apply(p, path[0]).to_leir() == whole.to_leir()


# ---------------------------------------------------------------------- the e-graph


def test_extraction_picks_the_cheapest_per_slot_without_the_product():
    from search.egraph import ChoiceGraph
    g = ChoiceGraph()
    g.add_structure(0, ["a0", "b0", "c0"])
    for s in "abc":
        for j in (1, 2):
            assert g.add_variant(f"{s}0", f"{s}{j}")
    table = {"a0": 3.0, "a1": 1.0, "a2": 5.0, "b0": 3.0, "b1": 5.0, "b2": 0.5, "c0": 2.0, "c1": 4.0, "c2": 6.0}
    asked = []

    def cost(k):
        asked.append(k)
        return table[k]
    sid, keys, total = g.extract(cost)
    assert (sid, keys, total) == (0, ["a1", "b2", "c0"], 3.5)
    assert sorted(set(asked)) == sorted(table)
    size = g.size()
    assert size["kernel_enodes"] == 9 and size["programs"] == 27
    assert size["eclasses"] == 3 + 4 + 1          # three slot classes, the slot lists, the program


def _calls(n_slots: int) -> tuple[int, int]:
    from search.egraph import ChoiceGraph
    g = ChoiceGraph()
    g.add_structure(0, [f"s{i}v0" for i in range(n_slots)])
    for i in range(n_slots):
        for j in (1, 2):
            g.add_variant(f"s{i}v0", f"s{i}v{j}")
    asked = []
    g.extract(lambda k: asked.append(k) or 1.0 + int(k[-1]))
    return len(asked), g.size()["programs"]


def test_extraction_work_grows_with_enodes_not_programs():
    calls3, programs3 = _calls(3)
    calls6, programs6 = _calls(6)
    assert (programs3, programs6) == (27, 729)
    assert calls6 <= 2 * calls3                   # twice the e-nodes, at most twice the pricing


def test_structures_are_unioned_and_unmeasured_kernels_never_extracted():
    import math
    from search.egraph import ChoiceGraph
    g = ChoiceGraph()
    g.add_structure(0, ["a0", "b0", "c0"])
    g.add_variant("c0", "c1")
    g.add_structure(1, ["f0", "c0"])             # a fusion of the first two statements
    table = {"a0": 3.0, "b0": 3.0, "c0": 2.0, "c1": 1.0, "f0": 4.0}
    assert g.extract(table.__getitem__) == (1, ["f0", "c1"], 5.0)     # the shared slot's best variant
    table["f0"] = math.inf
    assert g.extract(table.__getitem__) == (0, ["a0", "b0", "c1"], 7.0)
    assert g.size()["programs"] == 2 + 2
    assert not g.add_variant("c0", "c1")          # already held


# ---------------------------------------------------------------------- end to end


def options(**kw):
    from search import SearchOptions
    base = dict(algorithm="kernels", policy="cost", budget=5, confirm=0, min_repeat_ms=0.2, repeat=3, trials=2,
                kernel_nodes=300)
    base.update(kw)
    return SearchOptions(**base)


@pytest.fixture(scope="module")
def verifier():
    from lowering import Verifier
    v = Verifier("llvm", trials=2, timeout=120, repeat=3)
    yield v
    v.close()


def test_kernels_run_within_budget_replays(tmp_path, engine, verifier):
    from search import run_search
    from search.trajectory import load_trajectory
    out = tmp_path / "k.json"
    traj = run_search(parse(SMALL_SOFTMAX), options(budget=9), engine=engine, verifier=verifier, out=str(out),
                      progress=lambda m: None)
    rec = load_trajectory(str(out)).record
    assert rec["complete"] and rec["summary"]["samples"] <= 9
    kinds = [s["kind"] for s in rec["samples"]]
    assert kinds[:3] == ["kernel"] * 3                  # the three statements, each timed alone
    k = rec["summary"]["kernels"]
    assert k["target"] == "llvm" and k["machine"]["cores"] >= 1
    assert [s["statements"] for s in k["slots"]] == [[0, 1], [1, 2], [2, 3]]
    assert k["kernel_sum_ms"] == pytest.approx(sum(s["ms"] for s in k["slots"]))
    assert k["egraph"]["programs"] >= k["egraph"]["kernel_enodes"] >= 3
    composed = k["composed"]
    assert composed["predicted_ms"] > 0 and composed["measured_ms"] > 0
    assert composed["mapping"]["dropped"] == 0
    node = rec["nodes"][composed["node"]]
    if composed["steps"]:                               # a new program: verified and timed whole
        assert kinds[-1] == "composed" and node["via"] == "kernels"
        assert node["parent"] == 0 and node["depth"] == len(node["steps"]) == composed["steps"]
        assert composed["predicted_over_measured"] == pytest.approx(composed["predicted_ms"] / node["median_ms"])
    else:                                               # no variant beat its kernel: the original
        assert node["id"] == 0 and "composed" not in kinds
    # every node's path replays from the original
    for n in rec["nodes"][1:]:
        again = traj.program
        for st in n["steps"]:
            again = engine.apply(again, st)
        assert again.to_leir() == n["leir"]
    # the best program replays (search.replay's check, with the shared verifier: no new worker)
    from search.candidate_eval import path_tolerance
    best = traj.program
    for st in rec["best"]["steps"]:
        best = engine.apply(best, st)
    assert best.to_leir() == rec["best"]["leir"]
    tol = path_tolerance([st.get("exactness", "") for st in rec["best"]["steps"]]) if rec["best"]["steps"] else "exact"
    assert verifier.verify(traj.program, best, tol).equal


class TableVerifier:
    """A verifier whose timings are a table: each top-level statement of the original costs
    1 ms, any other statement less the longer its text (60 ms per character, at most 0.9 ms:
    rewritten statements are usually longer). A program's time is exactly the sum of its
    statements', so kernel sums predict whole programs exactly; every candidate verifies.
    The search's choices become deterministic; the real verifier checks the end result."""

    target = "llvm"
    number, repeat, warmup = 1, 3, 1

    def __init__(self, original):
        from engine.leir.printer import item_to_str
        self._text = item_to_str
        self.original = {item_to_str(n) for n in original.body}
        self.verified = self.measured = 0

    def ms(self, program) -> float:
        return sum(1.0 if self._text(n) in self.original else min(0.9, 60.0 / len(self._text(n)))
                   for n in program.body)

    def verify(self, original, candidate, tolerance=None):
        from lowering import Verdict
        self.verified += 1
        return Verdict(True, "equal")

    def measure(self, program, build=None):
        from lowering import Measurement
        self.measured += 1
        t = self.ms(program)
        return Measurement(True, "measured", median_ms=t, spread_ms=0.0, times_ms=[t] * 3)

    arch = "sm_90"

    def measure_paired(self, programs, protocol, build=None):
        """Paired rounds of table times: every ratio exact, so each candidate is decided at the
        sequential rule's first look."""
        n = protocol.looks()[0][0]
        self.measured += len(programs) - 1
        base = self.ms(programs[0])
        return {"ok": True, "number": 1, "rounds": n, "seconds": 0.0,
                "samples": [{"parent": [base] * n, "candidate": [self.ms(p)] * n} for p in programs[1:]]}


def test_kernels_composes_the_cheapest_choice_and_replays(engine, verifier):
    """With table timings: the structure with fewer statements (online softmax) and the
    kernel variants are measured, the extraction composes them, the composed program's path
    replays with Engine.apply, the real verifier finds it equal, and the kernel sum predicts
    the table's whole-program time exactly."""
    from search import run_search
    from search.candidate_eval import path_tolerance
    program = parse(SMALL_SOFTMAX)
    table = TableVerifier(program)
    traj = run_search(program, options(budget=12), engine=engine, verifier=table, progress=lambda m: None)
    rec = traj.record
    assert rec["summary"]["samples"] <= 12
    kinds = [s["kind"] for s in rec["samples"]]
    assert kinds[:3] == ["kernel"] * 3 and "structure" in kinds and kinds[-1] == "composed"
    k = rec["summary"]["kernels"]
    assert k["kernel_sum_ms"] == pytest.approx(3.0) and k["kernel_sum_over_whole"] == pytest.approx(1.0)
    assert k["structures_explored"] == 1
    composed = k["composed"]
    assert composed["structure_step"] == "online_softmax"
    assert composed["predicted_over_measured"] == pytest.approx(1.0, rel=1e-5)    # records keep 6 digits
    assert composed["mapping"]["dropped"] == 0 and composed["steps"] >= 2
    best = rec["best"]
    assert best["speedup"] == pytest.approx(3.0 / composed["measured_ms"], rel=1e-5) and best["speedup"] > 1.5
    again = program
    for st in best["steps"]:
        again = engine.apply(again, st)
    assert again.to_leir() == best["leir"]
    tol = path_tolerance([st.get("exactness", "") for st in best["steps"]])
    assert verifier.verify(program, again, tol).equal
    assert k["egraph"]["programs"] > k["egraph"]["kernel_enodes"]


def test_resumed_kernels_run_measures_nothing_again(engine):
    """A run resumed from its finished trajectory reuses every recorded kernel, structure and
    composed verdict and timing: the same choices, no verifier call."""
    from search import run_search
    program = parse(SMALL_SOFTMAX)
    first = run_search(program, options(budget=9), engine=engine, verifier=TableVerifier(program),
                       progress=lambda m: None).record
    table = TableVerifier(program)
    again = run_search(program, options(budget=9), engine=engine, verifier=table, resume=first,
                       progress=lambda m: None).record
    assert (table.verified, table.measured) == (0, 0)
    assert [s["key"] for s in again["samples"]] == [s["key"] for s in first["samples"]]
    assert again["best"]["leir"] == first["best"]["leir"]


def test_budget_below_the_slots_stops_cleanly(engine, verifier):
    from search import run_search
    traj = run_search(parse(SMALL_SOFTMAX), options(budget=3), engine=engine, verifier=verifier,
                      progress=lambda m: None)
    assert traj.samples == 0
    assert "budget below" in traj["summary"]["stop"]
    assert traj.best["steps"] == []


@pytest.mark.parametrize("field,value,message", [("kernel_nodes", 0, "--kernel-nodes"),
                                                 ("kernel_seconds", 0.0, "--kernel-seconds")])
def test_kernel_limits_are_checked(field, value, message):
    from engine.leir.diagnostics import LeirError
    with pytest.raises(LeirError, match=message):
        options(**{field: value}).validate()


def test_kernel_limits_reach_the_algorithm_parameters():
    from search.algorithms import params
    assert params(options()) == {"max_depth": 6, "kernel_nodes": 300, "kernel_seconds": 300.0}
    assert params(options(max_depth=1, kernel_seconds=5.0))["max_depth"] == 1


def test_node_limit_stops_the_local_search_and_says_so(engine):
    from search import run_search
    program = parse(SMALL_SOFTMAX)
    rec = run_search(program, options(budget=8, kernel_nodes=10), engine=engine, verifier=TableVerifier(program),
                     progress=lambda m: None).record
    k = rec["summary"]["kernels"]
    assert k["variants"] <= 10 and k["local_stop"] == "kernel nodes (10)"
    assert rec["summary"]["stop"] == "kernels: kernel nodes (10)"
    assert rec["summary"]["samples"] <= 8


def test_a_long_program_name_still_splits():
    from engine.leir.program import make_program
    from search.kernel_slots import split
    p = parse(SMALL_SOFTMAX)
    long = make_program("x" * 128, p.inputs, p.outputs, p.body)
    assert [len(s.kernel.name) for s in split(long)] == [128, 128, 128]


def test_same_seed_same_choices(engine):
    """With the same timings, two runs make the same samples, e-graph and composition."""
    from search import run_search
    program = parse(SMALL_SOFTMAX)
    runs = [run_search(program, options(budget=9, seed=3), engine=engine, verifier=TableVerifier(program),
                       progress=lambda m: None).record for _ in range(2)]
    same = lambda r: ([(s["kind"], s["key"], s.get("kernel_steps")) for s in r["samples"]],  # noqa: E731
                      r["summary"]["kernels"]["egraph"], r["summary"]["kernels"]["composed"], r["best"]["leir"])
    assert same(runs[0]) == same(runs[1])


SPLIT_VEC = ('[[composite]]\nname = "sv"\ndescription = "split then vectorise"\n[[composite.step]]\n'
             'strategy = "loop_split"\nloop = "@innermost @spatial"\nfactor = { min = 2 }\n'
             '[[composite.step]]\nstrategy = "loop_vectorization"\nloop = "@innermost"\n')


def test_composite_moves_are_a_slots_first_variants(engine, tmp_path):
    """A kernel's composite moves (search.composite) are variants one move deep, measured before
    its one-step variants, and a composed program built from one replays step by step."""
    from search import run_search
    table = tmp_path / "sv.toml"
    table.write_text(SPLIT_VEC)
    program = parse(SMALL_SOFTMAX)
    traj = run_search(program, options(budget=8, composites=str(table)), engine=engine,
                      verifier=TableVerifier(program), progress=lambda m: None)
    rec = traj.record
    k = rec["summary"]["kernels"]
    assert k["composite_variants"] >= 1
    variants = [s for s in rec["samples"] if s["kind"] == "kernel" and s.get("kernel_steps")]
    assert variants, "no kernel variant was measured"
    first = [st["strategy"] for st in variants[0]["kernel_steps"]]
    assert first == ["loop_split", "loop_vectorization"]        # the composite, before any one-step variant
    again = program
    for st in rec["best"]["steps"]:
        again = engine.apply(again, st)
    assert again.to_leir() == rec["best"]["leir"]



def test_a_slots_first_composites_are_of_different_kinds():
    """Of a slot's first composite moves, a kind not yet measured there comes before a second
    instance of one that was, even when the model expects the second instance to be faster; past
    COMPOSITE_FIRST composites, the expected saving decides."""
    from search.kernel_search import COMPOSITE_FIRST, COMPOSITE_RANK, Variant, priority
    tile = [Variant(f"t{i}", "k", None, rank=COMPOSITE_RANK + i, composite="tile-vectorise") for i in range(3)]
    block = Variant("b", "k", None, rank=COMPOSITE_RANK + 3, composite="register-block")
    step = Variant("s", "k", None, rank=0)
    est = {"t1": 0.5, "t2": 0.6, "b": 0.9, "s": 0.1}
    order = lambda done: max((tile[1], tile[2], block, step),  # noqa: E731
                             key=lambda v: priority(v, 1.0, est[v.key], done)).key
    assert order([]) == "t1"                        # nothing measured: the best estimate of the composites
    assert order([tile[0]]) == "b"                  # a tiling measured: the register block before another tiling
    assert order([tile[0], block]) == "t1"
    assert order(tile[:1] * COMPOSITE_FIRST) == "s"  # composites had their turn: the largest expected saving
    from search.kernel_search import STALE_TURN
    again = lambda done, stale: max((tile[1], block, step),  # noqa: E731
                                    key=lambda v: priority(v, 1.0, est[v.key], done, slot_stale=stale)).key
    assert again(tile[:1] * COMPOSITE_FIRST, STALE_TURN - 1) == "s"
    assert again(tile[:1] * COMPOSITE_FIRST, STALE_TURN) == "b"    # the slot's best line went flat: a kind untried
    assert again([*tile[:1] * COMPOSITE_FIRST, block], STALE_TURN) == "s"   # ... once per kind


def test_a_flat_line_gives_way_to_the_slots_other_moves():
    """Moves of every kind measured below a register block without beating their parents make the
    next move there wait behind a move elsewhere in the slot that the model expects less of; with
    no such ties the larger expected saving goes first."""
    from search.kernel_search import STALE_DISCOUNT, Variant, priority
    deep = Variant("d", "k", None, parent="rb", rank=0)        # a child of the register-blocked variant
    other = Variant("o", "k", None, parent="k", rank=0)       # a move from the slot's kernel
    est = {"d": 0.95, "o": 0.98}                               # savings 0.15 and 0.12 of a 1 ms slot
    first = lambda ties: max((deep, other), key=lambda v: priority(  # noqa: E731
        v, 1.0, est[v.key], [], stale=ties if v is deep else 0)).key
    assert first(0) == "d"
    assert first(2) == "o"
    assert 0.15 * STALE_DISCOUNT ** 2 < 0.12


ARGMAX_OF_SUMS = """program argmax_of_sums
input  A f32[4, 32]
input  G f32[8, 32]
output F f32[4, 1]

B^{4}_{tx=0}L^{8}_{a=0}L^{32}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*G^{f32,g}_{a,c};];
B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,0}=max(D^{f32,g}_{tx,0},C^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{1}_{a=0}[I^{i64,g}_{tx,a}=8;];
B^{4}_{tx=0}L^{8}_{a=0}[I^{i64,g}_{tx,0}=min(I^{i64,g}_{tx,0},if_then_else(C^{f32,g}_{tx,a}==D^{f32,g}_{tx,0},a,8));];
B^{4}_{tx=0}L^{1}_{a=0}[F^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+I^{f32,g}_{tx,a};];
"""


VECTORISE_REDUCTION = ('[[composite]]\nname = "vr"\ndescription = "lanes, then the lane combine unrolled"\n'
                       '[[composite.step]]\nstrategy = "reduction_vectorization"\nlanes = [16, 32]\n'
                       '[[composite.step]]\nstrategy = "loop_unrolling"\nsite = "next"\nloop = "@moved:1"\n')


def test_a_variant_its_program_refuses_is_never_measured(tmp_path):
    """The sums feed a comparison (an argmax), so the program refuses to reassociate them; the
    sums' kernel alone allows it. Such variants are found out before any sample is spent on
    them, and every composition replays all its kernels' steps."""
    from engine import Engine
    from search import run_search
    table = tmp_path / "vr.toml"
    table.write_text(VECTORISE_REDUCTION)
    program = parse(ARGMAX_OF_SUMS)
    rec = run_search(program, options(budget=14, composites=str(table), strategies="paper,extra"),
                     engine=Engine(strategies="paper,extra"), verifier=TableVerifier(program),
                     progress=lambda m: None).record
    k = rec["summary"]["kernels"]
    assert k["not_in_context"] >= 1, k
    reassociated = [s for s in rec["samples"] if s["kind"] == "kernel" and s.get("slot_kernel") == k["slots"][0]["kernel"]
                    and any(st.get("exactness") == "reassociating" for st in s.get("kernel_steps") or [])]
    assert reassociated == [], reassociated
    assert all(c["mapping"]["dropped"] == 0 for c in k["compositions"]), k["compositions"]


def test_siblings_of_one_kind_are_one_improvement():
    """Five storage layouts that each beat their parent by the first one's margin are one improvement
    and four ties (their kind's repeats), not five lines; a sibling of another kind, or one clearly
    faster than its kind's best so far, improves."""
    from types import SimpleNamespace

    from search.kernel_search import KernelSearch, Variant
    ks = KernelSearch.__new__(KernelSearch)
    ks.options = SimpleNamespace(noise_floor=0.02)
    parent = Variant("p", "k", None, ms=1.0, status="accepted", order=0)
    kids = [Variant("a", "k", None, parent="p", composite="layout", ms=0.90, status="accepted", order=1),
            Variant("b", "k", None, parent="p", composite="layout", ms=0.89, status="accepted", order=2),
            Variant("c", "k", None, parent="p", composite="layout", ms=0.80, status="accepted", order=3),
            Variant("d", "k", None, parent="p", composite="vectorise", ms=0.90, status="accepted", order=4)]
    ks.variants = {v.key: v for v in [parent, *kids]}
    ks._children = {"p": [v.key for v in kids]}
    assert [ks._improved(v) for v in kids] == [True, False, True, True]


def test_a_kind_that_keeps_losing_gives_way_even_below_zero():
    """Where every move is expected to lose (a negative saving), repeated losses of a kind from one
    parent push it further down: the twelfth of a kind 6x slower comes after the first of another."""
    from search.kernel_search import Variant, priority
    again = Variant("t", "k", None, parent="k", rank=0)
    other = Variant("o", "k", None, parent="k", rank=1)
    est = {"t": 1.5, "o": 1.6}
    first = lambda repeats: max((again, other), key=lambda v: priority(  # noqa: E731
        v, 1.0, est[v.key], [], repeats=repeats if v is again else 0)).key
    assert first(0) == "t"
    assert first(3) == "o"


def test_a_larger_budget_confirms_what_each_smaller_one_would():
    """The confirmation of a run at budget B holds the nodes a run stopped at each multiple of
    ``--compose-every`` would have confirmed (its best estimates among the nodes made before)."""
    from types import SimpleNamespace

    from search.run import to_confirm
    nodes = [SimpleNamespace(id=i, speedup=s, sample=at) for i, (s, at) in
             enumerate([(6.1, 15), (2.0, 10), (6.3, 31), (6.4, 40), (6.2, 47), (5.0, 60)], 1)]
    ranked = sorted(nodes, key=lambda n: (-n.speedup, n.id))
    assert [n.id for n in to_confirm(ranked, 1, 16, 64)] == [4, 1, 3]
    assert [n.id for n in to_confirm(ranked, 2, 16, 64)] == [4, 3, 1, 2]
    assert [n.id for n in to_confirm(ranked, 1, 16, 16)] == [4]       # no smaller budget
    assert to_confirm(ranked, 0, 16, 64) == []
