"""Composite moves (search.composite, search/composites.toml), their menu entries (search.space)
and lookahead ranking (search.lookahead)."""
import pytest
from conftest import EXAMPLES

LOOPS = ["loop_split", "loop_tiling", "loop_reorder", "loop_vectorization", "loop_parallelization",
         "loop_unrolling", "loop_fusion"]
TILE = "tile-vectorise-parallel"


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies=LOOPS)


@pytest.fixture(scope="module")
def known(engine):
    return [s.name for s in engine.rulebook.strategies]


@pytest.fixture(scope="module")
def matmul():
    from engine.leir.files import load_program
    return load_program(EXAMPLES / "matmul.leir")


@pytest.fixture(scope="module")
def found(engine, known, matmul):
    from search.composite import CompositeMenu, load_table
    cm = CompositeMenu(engine, load_table(None, known))
    return cm.of(matmul)


# ---------------------------------------------------------------------------- the table

def test_builtin_table_loads(known):
    from search.composite import load_table
    table = load_table(None, known)
    names = [c.name for c in table]
    assert TILE in names and len(names) == len(set(names))
    tile = table[names.index(TILE)]
    assert [s.strategy for s in tile.steps] == ["loop_tiling", "loop_reorder", "loop_vectorization",
                                                "loop_parallelization"]
    assert all(c.description and "\n" not in c.description and len(c.steps) >= 1 for c in table)


GOOD_STEP = '[[composite.step]]\nstrategy = "loop_vectorization"\nloop = "@innermost"\n'


@pytest.mark.parametrize("body, message", [
    ('[[composite]]\nname = "x"\ndescription = "d"\n[[composite.step]]\nstrategy = "loop_splitt"\n' + GOOD_STEP,
     "composite 1 (x) step 1: unknown strategy 'loop_splitt'"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n[[composite.step]]\nstrategy = "loop_split"\n'
     'factor = { min = 64, max = 8 }\n' + GOOD_STEP, "step 1 parameter 'factor': empty range (min 64 > max 8)"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n[[composite.step]]\nstrategy = "loop_split"\n'
     'factor = []\n' + GOOD_STEP, "an empty list allows nothing"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n' + GOOD_STEP + '[[composite.step]]\n'
     'strategy = "loop_parallelization"\nloop = "@sideways"\n', "step 2 parameter 'loop': unknown relation '@sideways'"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n' + GOOD_STEP + '[[composite.step]]\n'
     'strategy = "loop_parallelization"\nloop = "@created:2"\n', "'@created:2' must refer to an earlier step (1..1)"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n', "needs at least one [[composite.step]] entry"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n' + GOOD_STEP + GOOD_STEP.replace('"@innermost"', '"@innermost"\nsite = "near"'),
     "step 2: site must be one of same, next, any, got 'near'"),
    ('[[composite]]\nname = "x"\n' + GOOD_STEP + GOOD_STEP, "composite 1 (x): needs a one-line description"),
    ('[[composite]]\nname = "x"\ndescription = "d"\n' + GOOD_STEP + GOOD_STEP + '[[composite]]\nname = "x"\n'
     'description = "e"\n' + GOOD_STEP + GOOD_STEP, "composite 2 (x): the name is used twice"),
    ('[[composite]\nname = "x"', "not valid TOML"),
    ('title = "mine"\n', "unknown top-level key 'title'"),
])
def test_bad_table_entries_are_named(tmp_path, known, body, message):
    from engine.leir.diagnostics import LeirError
    from search.composite import load_table
    f = tmp_path / "mine.toml"
    f.write_text(body)
    with pytest.raises(LeirError) as e:
        load_table(f, known)
    assert str(f) in e.value.message and message in e.value.message


def test_missing_table_file_is_a_clear_error(tmp_path):
    from engine.leir.diagnostics import LeirError
    from search.composite import load_table
    with pytest.raises(LeirError, match="composites file not found: .*nope.toml"):
        load_table(tmp_path / "nope.toml")


def test_option_resolution_and_validation():
    from engine.leir.diagnostics import LeirError
    from search import SearchOptions
    from search.composite import resolve
    assert resolve("auto", "cost") == "" and resolve("auto", "random-all") == ""
    assert resolve("auto", "llm") is None and resolve("off", "cost") is None
    assert resolve("auto", "random") is None           # random draws from what the llm policy is shown
    assert all(resolve("auto", p, "kernels") == "" for p in ("cost", "random", "measure", "llm"))   # a kernel's moves
    assert resolve("on", "llm-free") == "" and resolve("my.toml", "cost") == "my.toml"
    with pytest.raises(LeirError, match="--lookahead must be 1, 2 or 3"):
        SearchOptions(lookahead=4).validate()


# ---------------------------------------------------------------------------- instances

def test_tile_vectorise_parallel_on_matmul(found):
    tiles = [i for i in found if i.composite.name == TILE]
    assert tiles, "no tile-vectorise-parallel instance on matmul"
    for inst in tiles:
        tiling, reorder, vec, par = inst.steps
        # both output loops tiled, the reduction moved inside the tile, the inner output loop
        # vectorised, the outer tile loop parallel
        assert {tiling.params["outer"], tiling.params["inner"]} == {"tx", "a"}
        assert (reorder.params["outer"], reorder.params["inner"]) == (tiling.params["inner"], "c")
        assert vec.params["loop"] == tiling.params["inner"]
        assert par.params["loop"] == tiling.params["new_names"][0]
        nest = inst.program.body[0]
        assert nest.loops[0].kind == "P" and nest.loops[-1].kind == "V" and nest.loops[-2].var == "c"


def test_instances_replay_step_by_step(engine, found, matmul):
    assert found
    for inst in found:
        program = matmul
        for step in inst.steps:
            program = engine.apply(matmul if step is inst.steps[0] else program,
                                   {"rule": step.rule, "site": list(step.site), "params": dict(step.params)})
            assert program.to_leir() == step.leir
        assert program.to_leir() == inst.program.to_leir()


def test_instances_are_deterministic_and_bounded(engine, known, matmul, found):
    from search.composite import CompositeMenu, Limits, load_table
    again = CompositeMenu(engine, load_table(None, known)).of(matmul)
    assert [[s.key for s in i.steps] for i in again] == [[s.key for s in i.steps] for i in found]
    small = CompositeMenu(engine, load_table(None, known), Limits(instances=1, width=1, enumerations=40))
    got = small.of(matmul)
    assert 1 <= len(got) <= len(small.table)
    names = [i.composite.name for i in got]
    assert len(names) == len(set(names))
    starved = CompositeMenu(engine, load_table(None, known), Limits(enumerations=1))
    assert starved.of(matmul) == []          # one enumeration cannot reach the end of a composite
    # the table-wide bound, spent in table order: exactly what the first composite's walk uses
    # leaves the rest of the table nothing
    from search.composite import Enumerations, instances
    table = load_table(None, known)
    k = next(j for j, c in enumerate(table) if any(i.composite.name == c.name for i in found))
    left, enums = [10 ** 6], Enumerations(engine)
    for comp in table[:k + 1]:
        instances(comp, matmul, enums, Limits(), left)
    capped = CompositeMenu(engine, table, Limits(table_enumerations=10 ** 6 - left[0])).of(matmul)
    first = [i for i in found if i.composite.name == table[k].name]
    assert first and [[s.key for s in i.steps] for i in capped] == [[s.key for s in i.steps] for i in first]
    assert len(capped) < len(found)


def test_tile_instance_verifies_equal_on_llvm(found, matmul):
    from lowering import Verifier
    from search.candidate_eval import path_tolerance
    inst = next(i for i in found if i.composite.name == TILE)
    with Verifier("llvm", trials=1, timeout=120) as v:
        verdict = v.verify(matmul, inst.program, path_tolerance([s.exactness for s in inst.steps]))
    assert verdict.equal, verdict.message


# ---------------------------------------------------------------------------- the menu

def test_space_menu_appends_composites(engine, known, matmul):
    from engine.leir.canonical import renaming_key
    from search.composite import load_table
    from search.space import Node, Space
    root = Node(0, matmul, renaming_key(matmul), None, 0)
    plain = Space(engine).menu(root, None, set())
    space = Space(engine, composites=load_table(None, known))
    menu = space.menu(root, None, set())
    assert [c.number for c in menu] == list(range(1, len(menu) + 1))
    assert [c.key for c in menu[:len(plain)]] == [c.key for c in plain]
    extra = menu[len(plain):]
    assert extra and all(len(c.steps) >= 2 and c.label == c.name for c in extra)
    assert TILE in {c.label for c in extra}
    assert len({c.key for c in menu}) == len(menu)
    c = next(c for c in extra if c.label == TILE)
    assert [r["strategy"] for r in c.records()] == [s.strategy for s in c.steps]
    assert engine.replay(matmul, c.records())[-1].to_leir() == c.program.to_leir()
    from search.prompt import menu_entry
    line = menu_entry(7, c, matmul)
    assert line.startswith(f"7. {TILE} at statement 1 ({c.description}): ") and "P^{" in line
    # a closed result is not offered again
    menu2 = space.menu(root, None, {c.key})
    assert c.key not in {m.key for m in menu2} and len(menu2) == len(menu) - 1


# ---------------------------------------------------------------------------- lookahead

class _Step:
    def __init__(self, strategy, program):
        self.strategy, self.program = strategy, program


class _Entry:
    def __init__(self, name):
        self.program, self.key, self.step = name, name, _Step("s", name)
        self.steps = (self.step,)


class _Space:
    """successors by name: a -> a1, a2; a1 -> a11; b -> b1."""
    TREE = {"a": ["a1", "a2"], "a1": ["a11"], "b": ["b1"]}

    def __init__(self):
        self.asked = []

    def successors(self, program, key):
        self.asked.append(key)
        return [(_Step("t", k), k) for k in self.TREE.get(key, [])]


class _Model:
    """predict: a fixed table of log speedups by state name (the features are the name)."""
    TABLE = {"a": 0.1, "a1": 0.0, "a2": 0.3, "a11": 0.9, "b": 0.5, "b1": 0.2, "c": 0.05}

    def predict(self, xs):
        return [self.TABLE[x[0]] for x in xs]


def _features(program, key, strategies):
    return [key, len(strategies)]


def test_lookahead_ranks_by_continuations():
    from search.lookahead import rank

    class Root:
        key = "root"
    menu = [_Entry("a"), _Entry("b"), _Entry("c")]
    assert rank(_Space(), Root, menu, _Model(), _features, 1, 4) == [0.1, 0.5, 0.05]
    assert rank(_Space(), Root, menu, _Model(), _features, 2, 4) == [0.3, 0.5, 0.05]
    space = _Space()
    three = rank(space, Root, menu, _Model(), _features, 3, 4)
    assert three == [0.9, 0.5, 0.05]                      # a -> a1 -> a11 wins at depth 3
    assert three == rank(_Space(), Root, menu, _Model(), _features, 3, 4)
    # width 1: only the best entry by its own prediction (b) looks ahead; a's 0.9 is not seen
    assert rank(_Space(), Root, menu, _Model(), _features, 3, 1) == [0.1, 0.5, 0.05]
    # entries looked past best-predicted first, continuations best-predicted first (a2 before a1)
    assert space.asked == ["b", "b1", "a", "a2", "a1", "c"]
    # width 1 also keeps one continuation per level: a2 (0.3) beats a1 (0.0), and a2 has no successor
    one = _Space()
    assert rank(one, Root, [_Entry("a")], _Model(), _features, 3, 1) == [0.3]
    assert one.asked == ["a", "a2"]


def test_lookahead_fanout_bounds_the_predictions():
    from search.lookahead import rank

    class Root:
        key = "root"

    class Counting(_Model):
        asked = 0

        def predict(self, xs):
            Counting.asked += len(xs)
            return super().predict(xs)
    # fanout 1: of a's continuations only a1 (the first in enumeration order) is predicted, so a2's 0.3 is
    # not seen at depth 2; a1's own continuation a11 is at depth 3
    assert rank(_Space(), Root, [_Entry("a")], Counting(), _features, 2, 4, fanout=1) == [0.1]
    assert Counting.asked == 2
    assert rank(_Space(), Root, [_Entry("a")], Counting(), _features, 3, 4, fanout=1) == [0.9]


def test_cli_bad_composites_file_exits_2(tmp_path, capsys):
    from search.__main__ import main
    bad = tmp_path / "mine.toml"
    bad.write_text('[[composite]]\nname = "x"\ndescription = "d"\n[[composite.step]]\nstrategy = "loop_splitt"\n'
                   + GOOD_STEP)
    out = tmp_path / "t.json"
    assert main([str(EXAMPLES / "softmax.leir"), "-o", str(out), "--composites", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown strategy 'loop_splitt'" in err and "Traceback" not in err
    assert not out.exists()


SPLIT_VEC = ('[[composite]]\nname = "sv"\ndescription = "split then vectorise"\n[[composite.step]]\n'
             'strategy = "loop_split"\nloop = "@innermost @spatial"\nfactor = { min = 2 }\n' + GOOD_STEP)


def test_a_composite_move_becomes_a_node_and_a_rollout_that_replay(engine, tmp_path):
    """The run records a composite's every step: the node's edge and a rollout's walk replay."""
    from engine import parse_program
    from search import SearchOptions
    from search.policies.base import Policy, Proposal
    from search.run import Run
    table = tmp_path / "sv.toml"
    table.write_text(SPLIT_VEC)
    prog = parse_program("B^{4}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];", name="scale",
                         inputs=[{"name": "A", "dtype": "f32", "shape": [4, 16]}],
                         outputs=[{"name": "C", "dtype": "f32", "shape": [4, 16]}])
    opts = SearchOptions(policy="random", budget=4, confirm=1, min_repeat_ms=0.2, repeat=3, trials=1,
                         composites=str(table))
    run = Run(prog, opts, engine=engine, progress=lambda m: None)
    try:
        root = run.start()
        moves = [c for c in run.menu(root) if c.name == "sv"]
        assert moves and all(len(c.steps) == 2 for c in moves)

        class Pick(Policy):
            def generate(self, req):
                return [Proposal(candidate=moves[0])]
        run.policy = Pick(opts, run.policy.ctx)
        child, = run.expand(root, 1)
        assert [s.strategy for s in child.steps] == ["loop_split", "loop_vectorization"]
        assert engine.replay(prog, child.steps)[-1].to_leir() == child.leir
        sample = run.samples[-1]
        assert sample["strategy"] == "sv" and len(sample["steps"]) == 2

        class First:
            def randrange(self, n):
                return n - 1                  # the menu's last entry: a composite move
        run.policy.rng = First()
        end = run.rollout(root, 1)
        assert end is not None and end.via == "rollout" and len(end.steps) == 2
        assert engine.replay(prog, end.steps)[-1].to_leir() == end.leir
    finally:
        run.close()


# ---------------------------------------------------------------------------- the CPU composites (issue 27)

CPU = ["register_blocking", "reduction_vectorization", "layout_transformation", "loop_unrolling"]


@pytest.fixture(scope="module")
def cpu_engine():
    from engine import Engine
    return Engine(strategies=CPU)


def _cpu_instances(cpu_engine, name, program):
    from search.composite import Enumerations, instances, load_table
    table = {c.name: c for c in load_table(None, [s.name for s in cpu_engine.rulebook.strategies])}
    return instances(table[name], program, Enumerations(cpu_engine))


def test_register_block_is_a_priority_move_of_one_step(cpu_engine, matmul):
    got = _cpu_instances(cpu_engine, "register-block", matmul)
    assert got and all(len(i.steps) == 1 and i.steps[0].strategy == "register_blocking" for i in got)
    assert {(i.steps[0].params["row_block"], i.steps[0].params["col_block"]) for i in got} <= \
        {(4, 16), (4, 32), (8, 16), (8, 32)}


def test_pack_register_block_tiles_the_statement_after_the_copy(cpu_engine, verifier):
    from engine.leir.files import program_from_json
    from rulekit import prog
    from search.composite import replays
    gemm = prog("B^{8}_{tx=0}L^{32}_{a=0}L^{16}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*F^{f32,g}_{a,c};];",
                {"A": (8, 16), "F": (32, 16)}, {"D": (8, 32)})
    got = _cpu_instances(cpu_engine, "pack-register-block", gemm)
    assert got
    for inst in got:
        lt, rb = inst.steps
        assert lt.strategy == "layout_transformation" and rb.strategy == "register_blocking"
        assert list(rb.site) == [lt.site[0] + 1]          # site = "next": the statement after the copy
        assert replays(cpu_engine, gemm, inst.steps)
    # the weight transposed, then the tile's columns read it contiguously
    f = [i for i in got if i.steps[0].params["tensor"] == "F"]
    assert f and "L^{32}_{a=0}L^{16}_{c=0}[C^{f32,g}_{c,a}=F^{f32,g}_{a,c};]" in f[0].program.to_leir()
    v = verifier.verify(gemm, program_from_json(f[0].program.to_json()), "exact")
    assert v.equal, v.message


def test_vectorise_reduction_unrolls_the_lane_combine(cpu_engine, verifier):
    from engine.leir.files import load_program
    from search.composite import replays
    softmax = load_program(EXAMPLES / "softmax.leir")
    got = _cpu_instances(cpu_engine, "vectorise-reduction", softmax)
    assert got
    for inst in got:
        rv, un = inst.steps
        assert rv.strategy == "reduction_vectorization" and rv.params["lanes"] in (16, 32)
        assert un.strategy == "loop_unrolling" and un.params["loop"] == rv.params["loop"]
        assert list(un.site) == [rv.site[0] + 1]
        assert replays(cpu_engine, softmax, inst.steps)
    first = got[0].program.to_leir()
    assert "V^{16}_{a=0}" in first and "U^{16}_{a=0}" in first
    v = verifier.verify(softmax, got[0].program, "exact")   # the max is bitwise
    assert v.equal, v.message
