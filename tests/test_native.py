"""A helper is defined by its compute rules alone: the code generator compiles them (edge
cases included), and a rule it cannot compile is refused when the rules load, not at run time."""
import subprocess
import sys

import pytest

from engine.leir.diagnostics import LeirError
from engine.leir.files import load_programs
from engine.rewrite.compute import ComputeRules, HelperEvaluator, helper_problems
from engine.rewrite.rulebook import load_rulebook
from engine.rewrite.schema import Unsupported
from engine.rewrite.terms import Interner, encode

from conftest import CORPUS


@pytest.fixture(scope="module")
def texts():
    return [t for _, t in load_rulebook(None).programs()]


def _run(rules, interner, name, args):
    """The generated helper's result: an int key, or Unsupported."""
    try:
        return rules.generated[name](HelperEvaluator(rules, interner), *args)
    except Unsupported:
        return Unsupported


def test_loop_list_surgery_is_list_surgery_at_every_position(texts):
    """LGet / LSet / LIns / LDel, compiled from rules/leir/helpers.egg, against Python's own list
    operations; past the end (or before the start) the rules have no case: Unsupported."""
    rules = ComputeRules(texts)
    it = Interner()
    nil = it(("LNil",))
    lps = [it(("Lp", "L", v, n)) for v, n in (("i", 4), ("j", 8), ("k", 2))]
    new = it(("Lp", "P", "u", 3))

    def key(xs):
        k = nil
        for x in reversed(xs):
            k = it(("LCons", x, k))
        return k

    for n in range(len(lps) + 1):
        xs = lps[:n]
        ls = key(xs)
        for i in range(-1, 5):
            inside = 0 <= i < n
            assert _run(rules, it, "LGet", (ls, i)) == (xs[i] if inside else Unsupported), ("LGet", n, i)
            assert _run(rules, it, "LSet", (ls, i, new)) == (key(xs[:i] + [new] + xs[i + 1:]) if inside
                                                             else Unsupported), ("LSet", n, i)
            assert _run(rules, it, "LDel", (ls, i)) == (key(xs[:i] + xs[i + 1:]) if inside else Unsupported)
            assert _run(rules, it, "LIns", (ls, i, new)) == (key(xs[:i] + [new] + xs[i:]) if 0 <= i <= n
                                                             else Unsupported), ("LIns", n, i)


def test_substitution_shortcut_matches_full_evaluation_on_corpus_statements(texts):
    """The NAME_MAPS shortcut (a term not mentioning the name is returned unchanged) gives what
    evaluating every rule gives, and substitution really replaces the variable."""
    fast, full = ComputeRules(texts), ComputeRules(texts, shortcuts=False)
    checked = changed = 0
    for p in load_programs(CORPUS)[::6]:
        it = Interner()
        enc = encode(p.body, it)
        repl = it(("Bin", "+", it(("Var", "q")), it(("Num", "1"))))
        for path, k in sorted(enc.path_key.items()):
            for v in sorted(HelperEvaluator(full, it).names(k)[0]) + ["absent"]:
                a, c = _run(fast, it, "SubI", (k, v, repl)), _run(full, it, "SubI", (k, v, repl))
                assert a == c and a is not Unsupported, (p.name, path, v)
                assert (a == k) == (v == "absent"), (p.name, path, v)
                assert v not in HelperEvaluator(full, it).names(a)[0]
                checked += 1
                changed += a != k
    assert checked > 100 and changed > 50


BAD = """
(constructor Peel (Expr) Expr)
(rewrite (Peel (SubE e v r)) e :ruleset compute)
"""


def test_a_helper_the_generator_cannot_compile_is_refused_at_load(tmp_path):
    from rulekit import rule_file_dir
    d = rule_file_dir(tmp_path, BAD)
    problems = helper_problems(d)
    assert len(problems) == 1
    f, line, col, msg = problems[0]
    assert f.endswith("x.egg") and line == 3 and "Peel" in msg and "SubE" in msg
    from engine.rewrite.enumerator import Enumerator
    with pytest.raises(LeirError, match="Peel"):
        Enumerator(d)
    r = subprocess.run([sys.executable, "-m", "engine.lint", str(d)], capture_output=True, text=True)
    assert r.returncode == 2 and "x.egg:3:1: error: helper Peel" in r.stderr, r.stderr
    assert helper_problems(None) == []
