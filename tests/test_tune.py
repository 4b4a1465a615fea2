"""Rewrite-then-tune: the plain form MetaSchedule is given (search.plain), the TIR it tunes
(search.tune.tune_module: scan blocks kept out of its parallel/vector post-processor), and the
torch eager column of benchmarks/search.py checked against our lowering."""
import pytest
from conftest import EXAMPLES, ROOT


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper")


def step(engine, program, strategy, pred=lambda s: True):
    for s in engine.enumerate(program):
        if s.strategy == strategy and pred(s):
            return s.program
    raise AssertionError(f"no {strategy} step")


def loops_of(program):
    from engine.leir.ast import Nest
    out = []

    def walk(items):
        for it in items:
            if isinstance(it, Nest):
                out.extend(it.loops)
                walk(it.body)
    walk(program.body)
    return out


def verify_equal(a, b):
    from lowering.verify import verify
    r = verify(a, b, trials=2)
    assert r.ok and r.equal, r.to_dict()


def test_plain_form_undoes_tiles_splits_and_annotations(engine):
    from engine import load_program
    from search.plain import plain_program
    from search.tune import serial_program
    orig = load_program(EXAMPLES / "matmul.leir")
    p = step(engine, orig, "loop_tiling")
    p = step(engine, p, "loop_parallelization")
    p = step(engine, p, "loop_split")
    assert len(loops_of(p)) == 6 and {l.kind for l in loops_of(p)} >= {"B", "P"}
    plain = plain_program(p)
    assert [(l.kind, l.extent) for l in loops_of(plain)] == [("L", 128), ("L", 192), ("L", 256)]
    assert plain.to_leir() == serial_program(orig).to_leir()
    verify_equal(orig, plain)


def test_plain_form_keeps_the_online_softmax_rewrite(engine):
    from engine import load_program
    from search.plain import plain_program
    orig = load_program(EXAMPLES / "softmax.leir")
    online = step(engine, orig, "online_softmax")
    split = step(engine, online, "loop_split", lambda s: s.program.to_leir().count("L^") > 2)
    plain = plain_program(split)
    # the rewrite stays (two statements, running max F and sum G), the split is gone
    assert plain.to_leir() == plain_program(online).to_leir() != plain_program(orig).to_leir()
    assert sorted(l.extent for l in loops_of(plain)) == [32, 32, 1024, 1024]
    assert all(l.kind == "L" for l in loops_of(plain))
    verify_equal(orig, plain)


def test_loops_that_are_not_a_split_stay(tmp_path):
    from engine.leir.files import parse_program
    from search.plain import plain_program
    text = ("program p\ninput A f32[8, 4]\ninput E f32[32]\noutput C f32[32]\noutput D f32[8, 4]\n\n"
            # i*4+j everywhere: a split of one loop of 32 -> fused back (named j)
            "L^{8}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i*4+j}=E^{f32,g}_{i*4+j}*2;];"
            # independent axes, and a stride that is not the inner extent: stay
            "L^{8}_{i=0}P^{4}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}+A^{f32,g}_{i,3-j};];\n")
    p = parse_program(text)
    plain = plain_program(p)
    assert [(l.var, l.extent) for l in loops_of(plain)] == [("j", 32), ("i", 8), ("j", 4)]
    assert "C^{f32,g}_{j}=E^{f32,g}_{j}*2" in plain.to_leir()
    verify_equal(p, plain)


@pytest.mark.slow    # 4.5 min on 2 cores (MetaSchedule's postprocessor and a timed build); the plain-form tests stay
def test_scan_blocks_are_what_the_postprocessor_rejected(engine):
    """The cause, kept as a test: the prefix-max block of softmax reads F[i, a-1] and writes
    F[i, a]; MetaSchedule's RewriteParallelVectorizeUnroll fails on it unless its loops carry
    the scan annotation, and the annotated TIR builds and computes softmax."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from engine import load_program
    from lowering.tir import from_tvmscript, lower_module
    from search.plain import plain_program
    from search.tune import evaluate_schedule, tune_module, tune_target
    orig = load_program(EXAMPLES / "softmax.leir")
    online = step(engine, orig, "online_softmax")

    def postproc_accepts(mod):
        sch = tvm.s_tir.Schedule(mod)
        root = sch.get_sblock("root")
        sch.annotate(root, "meta_schedule.parallel", 32)
        sch.annotate(root, "meta_schedule.vectorize", 64)
        pp = ms.postproc.RewriteParallelVectorizeUnroll()
        pp._initialize_with_tune_context(ms.TuneContext(mod=mod, target=tune_target()))
        return bool(pp.apply(sch)), sch
    mod, scratch, scans = tune_module(online)
    assert scans == ["F", "G"]
    # the rows of the scan are independent: its row loop comes parallel, its running loop serial
    assert mod.script().count("T.parallel(32") == 1 and "T.parallel(1024" not in mod.script()
    bare = tvm.IRModule({"main": from_tvmscript(lower_module(plain_program(online), "llvm", vectorize=False).text)})
    assert postproc_accepts(bare)[0] is False
    ok, sch = postproc_accepts(mod)
    assert ok
    assert tune_module(orig)[2] == []                       # reductions with an init are no scans
    r = evaluate_schedule(sch.mod, plain_program(online), scratch, original=orig, rounds=1, warmup=1, repeat=2)
    assert r["ok"] and r["rel_err"] < 1e-5


def test_metaschedule_is_given_tvms_exp():
    """Our exp as vector arithmetic is written with T.Let, and MetaSchedule failed every tuning of a
    program with an exp on it ('Do not have a default for prim.Let': softmax, attention on
    2026-11-28); the TIR it tunes uses TVM's exp (a real tuning: the slow test below)."""
    from engine import load_program
    from lowering.tir import lower_module
    from search.plain import plain_program
    from search.tune import tune_module
    orig = load_program(EXAMPLES / "softmax.leir")
    assert "T.Let" in lower_module(plain_program(orig), "llvm", vectorize=False).text
    script = tune_module(orig)[0].script()
    assert "T.Let" not in script and script.count("T.exp(") == 2


@pytest.mark.slow
def test_metaschedule_tunes_the_online_softmax():
    """A real tuning run (8 trials): before the plain form and the scan annotation, every schedule
    of this program was rejected ('no valid schedule')."""
    from engine import Engine, load_program
    from search.tune import check_ffi, tune
    if check_ffi():
        pytest.skip(check_ffi())
    orig = load_program(EXAMPLES / "softmax.leir")
    online = step(Engine(strategies="paper"), orig, "online_softmax")
    r = tune(online, 8, original=orig, rounds=1, warmup=1, repeat=2)
    assert r["ok"] and r["measured"] > 0 and r["rel_err"] < 1e-5 and r["scan_blocks"] == ["F", "G"]


def test_torch_table_matches_our_lowering_on_the_examples():
    """benchmarks/torch_eager.EXAMPLES computes what each bundled example computes (our build,
    same seeded inputs); a wrong entry (here: softmax over the other axis) is caught."""
    import sys

    from engine import load_program
    sys.path.append(str(ROOT / "benchmarks"))
    import torch_eager
    assert sorted(torch_eager.EXAMPLES) == ["attention", "conv2d", "layernorm", "matmul", "softmax"]
    for name in torch_eager.EXAMPLES:
        assert torch_eager.check_example(name, load_program(EXAMPLES / f"{name}.leir")) < 1e-5, name
    import torch
    right = torch_eager.EXAMPLES["softmax"]
    try:
        torch_eager.EXAMPLES["softmax"] = lambda t: {"C": torch.softmax(t["A"], dim=0)}
        assert torch_eager.check_example("softmax", load_program(EXAMPLES / "softmax.leir")) > 1e-2
    finally:
        torch_eager.EXAMPLES["softmax"] = right
    fn, args = torch_eager.example_call("matmul", load_program(EXAMPLES / "matmul.leir"))
    assert torch_eager.time_ms(fn, args, 1, warmup=1, repeat=2, min_repeat_ms=0.1) > 0


def test_benchmark_rejects_unknown_algorithms_and_policies(capsys):
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_search", ROOT / "benchmarks" / "search.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--algorithms", "greedy,nosuch", "--phase", "table", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err
    assert "error: unknown algorithm nosuch" in err and "Traceback" not in err
    assert bench.main(["--policies", "nopolicy", "--phase", "table"]) == 2
    assert "unknown policy nopolicy" in capsys.readouterr().err
