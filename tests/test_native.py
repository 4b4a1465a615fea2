"""engine.native's helper definitions agree with their compute rules, edge cases included."""
import pytest

from engine.rewrite.compute import ComputeRules, Evaluator
from engine.rewrite.schema import Unsupported
from engine.leir.files import load_programs
from engine.rewrite.native import NATIVE
from engine.rewrite.rulebook import load_rulebook
from engine.rewrite.terms import Interner, encode

from conftest import CORPUS


@pytest.fixture(scope="module")
def rules():
    texts = [t for _, t in load_rulebook(None).programs()]
    return ComputeRules(texts, shortcuts=False)


def _both(rules, interner, name, args):
    """(native result, rule result); each an int key or the exception class it raised."""
    out = []
    for fn in (NATIVE[name], rules.generated[name]):
        ev = Evaluator(rules, interner)
        try:
            out.append(fn(ev, *args))
        except Unsupported:
            out.append(Unsupported)
    return out


def test_loop_list_surgery_matches_the_rules_at_every_position(rules):
    it = Interner()
    nil = it(("LNil",))
    lps = [it(("Lp", "L", v, n)) for v, n in (("i", 4), ("j", 8), ("k", 2))]
    new = it(("Lp", "P", "u", 3))
    lists = [nil]
    for lp in reversed(lps):
        lists.append(it(("LCons", lp, lists[-1])))
    for ls in lists:
        for i in range(-1, 5):
            for name, args in (("LGet", (ls, i)), ("LSet", (ls, i, new)), ("LIns", (ls, i, new)),
                               ("LDel", (ls, i))):
                a, c = _both(rules, it, name, args)
                assert a == c, (name, i)
    # both sides really do answer: a set past the end is refused, an insert at the end is not
    assert _both(rules, it, "LSet", (lists[2], 2, new)) == [Unsupported, Unsupported]
    assert _both(rules, it, "LIns", (lists[2], 2, new))[0] != Unsupported


def test_substitution_matches_the_rules_on_corpus_statements(rules):
    checked = 0
    for p in load_programs(CORPUS)[::6]:
        it = Interner()
        enc = encode(p.body, it)
        repl = it(("Bin", "+", it(("Var", "q")), it(("Num", "1"))))
        for path, k in sorted(enc.path_key.items()):
            node = it.keys[k]
            name = "SubI"
            for v in sorted(Evaluator(rules, it).names(k)[0]) + ["absent"]:
                a, c = _both(rules, it, name, (k, v, repl))
                assert a == c and a is not Unsupported, (p.name, path, v)
                checked += 1
            body = node[2] if node[0] == "Nest" else None
            if body is not None:
                a, c = _both(rules, it, "SubIs", (body, "i", repl))
                assert a == c
    assert checked > 100
