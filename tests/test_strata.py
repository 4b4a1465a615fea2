"""The stratified analysis schedule (engine.strata) computes what plain saturation computes."""
import egglog.bindings as b

from engine.rewrite.enumerator import Enumerator
from engine.leir.files import load_programs
from engine.rewrite.strata import strata

from conftest import CORPUS

SCHEMA = """
(datatype E (N i64) (Add E E))
(relation Seen (E))
(relation Big (E))
(function Size (E) i64 :merge (min old new))
"""
RULES = """
(rule ((= e (N k))) ((set (Size e) 1)) :ruleset analysis :name "size-leaf")
(rule ((= e (Add a c)) (= x (Size a)) (= y (Size c))) ((set (Size e) (+ 1 (+ x y)))) :ruleset analysis :name "size-add")
(rule ((= s (Size e)) (> s 2)) ((Big e)) :ruleset analysis :name "big")
(rule ((Seen e)) ((Seen e)) :ruleset analysis :name "seen-self")
(rule ((= e (N k))) ((Seen e)) :ruleset analysis :name "seen-leaf")
"""


def _layers():
    eg = b.EGraph()
    eg.run_program(*eg.parse_program(SCHEMA + "(ruleset analysis)"))
    rules = [c.rule for c in eg.parse_program(RULES)]
    tables = set(eg.freeze().functions)
    return [([r.name for r in layer], rec) for layer, rec in strata(rules, tables)]


def test_dependencies_come_first_and_cycles_saturate():
    layers = _layers()
    where = {name: i for i, (names, _) in enumerate(layers) for name in names}
    assert where["size-leaf"] < where["size-add"] < where["big"]
    # size-add reads the Size it writes: a recursive step of its own; seen-self too
    assert ("size-add" in layers[where["size-add"]][0]) and layers[where["size-add"]][1] is True
    assert layers[where["seen-self"]][1] is True
    # independent non-recursive rules of the same depth share one single-iteration step
    assert layers[where["size-leaf"]] == (["size-leaf", "seen-leaf"], False)
    assert layers[where["big"]][1] is False


def test_stratified_engine_lists_the_same_neighbours():
    """Every corpus program of a deterministic spread: identical neighbours (text, provenance)
    under the stratified schedule and under one saturated analysis ruleset."""
    progs = load_programs(CORPUS)[::9]
    fast, plain = Enumerator(), Enumerator(stratified=False)
    for p in progs:
        a = [(nb.leir, [q.to_json() for q in nb.provenances]) for nb in fast.enumerate(p).neighbours]
        c = [(nb.leir, [q.to_json() for q in nb.provenances]) for nb in plain.enumerate(p).neighbours]
        assert a == c, p.name
        assert a, p.name


def test_an_engine_loading_some_strategies_lists_what_the_full_engine_does():
    """A dedicated engine inserts only the facts its rules read; that must change nothing."""
    full = Enumerator()
    for chosen in ([s.name for s in full.book.strategies if s.category in ("graph", "operator")
                    and s.origin in ("paper", "extra")],
                   ["loop_binding", "cache_read_write", "online_softmax"]):
        some = Enumerator(strategies=chosen)
        assert len(some._queried) < len(full._queried)
        for p in load_programs(CORPUS)[::11]:
            a = [(nb.leir, [q.to_json() for q in nb.provenances]) for nb in some.enumerate(p, chosen).neighbours]
            c = [(nb.leir, [q.to_json() for q in nb.provenances]) for nb in full.enumerate(p, chosen).neighbours]
            assert a == c, (chosen[:2], p.name)


def test_facts_kept_between_queries_do_not_depend_on_history():
    """Divisor / Cut facts stay in the base e-graph once inserted (engine.enumerate
    STATIC_RELATIONS): a program lists the same neighbours on a fresh engine and after others."""
    progs = load_programs(CORPUS)
    target = next(p for p in progs if p.name == "Standard_matrix_multiplication")
    others = progs[::7]
    fresh = Enumerator(strategies=["loop_split", "loop_tiling", "tensor_split_to_decouple_operators"])
    first = [nb.leir for nb in fresh.enumerate(target).neighbours]
    used = Enumerator(strategies=["loop_split", "loop_tiling", "tensor_split_to_decouple_operators"])
    for p in others:
        used.enumerate(p)
    assert len(used._static) > len(fresh._static)
    assert [nb.leir for nb in used.enumerate(target).neighbours] == first
    assert any("loop_tiling" == q.strategy for nb in fresh.enumerate(target).neighbours for q in nb.provenances)
