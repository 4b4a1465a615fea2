"""Issue 14 item 4: static checks of the CUDA lowering, no GPU needed (``lowering.kernelcheck``
over TVM's lowered module: host allocations, aliased and scoped kernel arguments, reductions
over threads without a cross-thread reduction, 16-bit scalar arguments), and the kernel plan
that makes them pass (``lowering.cuda_plan``).

The checks fail on the TVMScript the lowering produced before the fix (kept in
tests/data/issue14/*.before.tvmscript, built with TVM's default pass options as it was then)
and pass on the current lowering of the issue programs, the whole public corpus and a seeded,
strategy-stratified sample of neighbours (a small one here, at least 400 in the ``slow`` test).
"""
import pytest

from conftest import ROOT, corpus_records
from neighbour_sample import corpus_programs, stratified_neighbours

DATA = ROOT / "tests" / "data" / "issue14"
# corpus programs whose neighbours the default run samples: reductions over threads, norms,
# losses, softmax, pooling, matmul, convolution, scans (fast to enumerate)
DEFAULT_PROGRAMS = ("softmax", "Hingeloss", "L2Norm", "MSELoss", "TripletMarginLoss", "KLDivLoss", "Max_Pooling_1D",
                    "cumsum", "Gemm_Sigmoid_Sum_LogSumExp", "Matrix_vector_multiplication")


def _load(name):
    from engine.leir.files import load_program
    return load_program(DATA / name)


def _checks(found):
    return {f.check for f in found}


@pytest.mark.parametrize("name,expected", [
    ("l2norm", {"host-allocation", "aliased-argument"}),
    ("triplet_margin_loss", {"host-allocation", "aliased-argument", "scoped-argument"}),
    ("maxpool1d_f16", {"host-allocation", "half-argument"}),
])
def test_checks_fail_on_the_lowering_before_the_fix(name, expected, tvm):
    from lowering.kernelcheck import check_tvmscript
    found = check_tvmscript((DATA / f"{name}.before.tvmscript").read_text(), config={})
    assert _checks(found) == expected, [str(f) for f in found]


def test_l2norm_before_the_fix_read_its_norm_under_another_name(tvm):
    from lowering.kernelcheck import check_tvmscript
    found = check_tvmscript((DATA / "l2norm.before.tvmscript").read_text(), config={})
    alias = [f for f in found if f.check == "aliased-argument"]
    assert len(alias) == 1 and alias[0].function == "main_kernel_1" and "buffer 'E'" in alias[0].message


def test_a_reduction_over_threads_without_all_reduce_is_a_race(tvm):
    """TVM's all-reduce needs an init; an update of a written tensor over threads has none."""
    from lowering.kernelcheck import check_tvmscript
    text = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32"), C: T.Buffer((), "float32")):
    T.func_attr({"tir.noalias": True})
    for b in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            with T.sblock("C"):
                v_tx = T.axis.remap("R", [tx])
                C[()] = C[()] + A[v_tx]
'''
    found = check_tvmscript(text)
    assert _checks(found) == {"thread-race"} and "threadIdx.x updates the same element of 'C'" in str(found[0])


@pytest.mark.parametrize("name", ["l2norm.leir", "triplet_margin_loss.leir", "maxpool1d_f16.leir", "mse_f16.leir",
                                  "huber_f16.leir", "scan_over_threads.leir"])
def test_checks_pass_on_the_issue_programs(name, tvm):
    from lowering.kernelcheck import check_program
    assert check_program(_load(name)) == []


def test_checks_pass_on_the_whole_corpus(tvm):
    from lowering.kernelcheck import check_program
    if not corpus_records():
        pytest.skip("corpus not available")
    bad = {p.name: [str(f) for f in check_program(p)] for p in corpus_programs()}
    assert {k: v for k, v in bad.items() if v} == {} and len(bad) == len(corpus_records())


@pytest.mark.slow
def test_checks_pass_on_the_corpus_at_half_precision(tvm):
    """Every corpus program with f32 replaced by f16 (the GPU run's f16 variants): half values
    are never kernel arguments, whatever constants the program has."""
    import json

    from engine.leir.files import program_from_json
    from lowering.kernelcheck import check_program
    if not corpus_records():
        pytest.skip("corpus not available")
    bad = {}
    for r in corpus_records():
        p = program_from_json(json.loads(json.dumps(r).replace('"f32"', '"f16"').replace("^{f32,", "^{f16,")))
        found = check_program(p)
        if found:
            bad[p.name] = [str(f) for f in found]
    assert bad == {}


def _neighbour_failures(sample):
    from lowering.errors import LoweringError
    from lowering.kernelcheck import check_program
    bad = []
    for p, s in sample:
        try:
            found = check_program(s.program)
        except LoweringError as e:
            found = [f"cuda lowering refused: {e}"]
        if found:
            bad.append((s.strategy, p.name, s.leir[:200], [str(f) for f in found]))
    return bad


def test_checks_pass_on_a_stratified_neighbour_sample(tvm):
    if not corpus_records():
        pytest.skip("corpus not available")
    sample = stratified_neighbours(corpus_programs(DEFAULT_PROGRAMS), 2)
    assert len(sample) >= 40 and len({s.strategy for _, s in sample}) >= 20
    assert _neighbour_failures(sample) == []


@pytest.mark.slow
def test_checks_pass_on_400_stratified_neighbours_of_the_corpus(tvm):
    if not corpus_records():
        pytest.skip("corpus not available")
    sample = stratified_neighbours(corpus_programs(), 16)
    assert len(sample) >= 400
    assert _neighbour_failures(sample) == []


# --------------------------------------------------------------------------- the kernel plan

def _p(body, inputs, outputs, name="t"):
    from engine.leir.files import program_from_json
    decl = lambda d: [{"name": n, "dtype": t, "shape": list(s)} for n, (t, s) in d.items()]  # noqa: E731
    return program_from_json({"name": name, "inputs": decl(inputs), "outputs": decl(outputs), "leir": body})


F = "f32"


def test_plan_lowers_thread_reductions_as_all_reduces_and_reorders_their_loops():
    from lowering.cuda_plan import plan_cuda
    from lowering.tir import lower_to_tvmscript
    p = _p("L^{8}_{a=0}B^{64}_{tx=0}[G^{f32,g}=G^{f32,g}-A^{f32,g}_{a,tx}+C^{f32,g}_{a,tx};];"
           "B^{1}_{tx=0}[D^{f32,g}=G^{f32,g}*2;];", {"A": (F, (8, 64)), "C": (F, (8, 64))}, {"D": (F, ())})
    plan = plan_cuda(p)
    assert plan.allreduce == {0} and plan.serialised == ()
    assert plan.program.body[0].loops[0].var == "tx"          # bound reduction loop outside the serial one
    text = lower_to_tvmscript(p, "cuda")
    assert "G[()] = G[()] + (-A[v_a, v_tx] + C[v_a, v_tx])" in text
    assert 'for b_launch in T.thread_binding(1, thread="blockIdx.x"):\n        for tx in T.thread_binding(64' in text


@pytest.mark.parametrize("body,why", [
    ("B^{64}_{tx=0}[G^{f32,g}=G^{f32,g}*0.5+A^{f32,g}_{tx};];", "not X+e, X-e, X*e"),
    ("B^{4}_{bx=0}B^{16}_{tx=0}[G^{f32,g}=G^{f32,g}+A^{f32,g}_{bx*16+tx};];", "block index"),
    ("B^{64}_{tx=0}[G^{f32,g}=A^{f32,g}_{tx};];B^{64}_{tx=0}[G^{f32,g}=G^{f32,g}+A^{f32,g}_{tx};];",
     "already written"),
    ("B^{64}_{tx=0}[G^{i64,g}=G^{i64,g}+A^{f32,g}_{tx};];", "real values into an integer tensor"),
])
def test_plan_runs_other_reductions_over_bound_loops_serially(body, why):
    from lowering.kernelcheck import check_program
    from lowering.cuda_plan import plan_cuda
    p = _p(body, {"A": (F, (64,))}, {"G": ("i64" if "i64" in body else F, ())})
    plan = plan_cuda(p)
    assert any(r.startswith("reduction into 'G' over a bound loop that is not an all-reduce") and why in r
               for _, _, r in plan.serialised), plan.serialised
    assert all(l.kind != "B" for n in plan.program.body for l in n.loops) and not plan.allreduce
    assert check_program(p) == []


def test_plan_treats_a_split_dimension_as_the_one_it_was():
    """set_storage_layout's D_{tx//384,tx%384,a}: the pair determines tx, nothing races."""
    from lowering.cuda_plan import plan_cuda
    p = _p("B^{768}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx//384,tx%384,a}=A^{f32,g}_{tx,a};];"
           "B^{768}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx//384,tx%384,a}*2;];",
           {"A": (F, (768, 4))}, {"C": (F, (768, 4))})
    assert plan_cuda(p).serialised == ()
    q = _p("B^{768}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx//384,tx%2,a}=A^{f32,g}_{tx,a};];"
           "B^{768}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx//384,tx%2,a}*2;];",
           {"A": (F, (768, 4))}, {"C": (F, (768, 4))})
    assert plan_cuda(q).serialised == ((1, "tx", "threads of threadIdx.x would race on 'D'"),)


@pytest.mark.parametrize("body,n,serial", [
    ("B^{4}_{bx=0}L^{8}_{a=0}B^{128}_{tx=0}[C^{f32,g}_{bx,a*128+tx}=A^{f32,g}_{bx,a*128+tx}*2;];", 1024, False),
    ("B^{4}_{bx=0}B^{128}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{bx,a*128+tx}=A^{f32,g}_{bx,a*128+tx}*2;];", 1024, False),
    ("B^{4}_{bx=0}B^{128}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{bx,a+tx*8}=A^{f32,g}_{bx,tx}*2;];", 1024, False),
    ("B^{4}_{bx=0}B^{128}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{bx,a*128+tx//2}=A^{f32,g}_{bx,tx}*2;];", 960, True),
    ("B^{4}_{bx=0}B^{128}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{bx,a+tx}=A^{f32,g}_{bx,tx}*2;];", 135, True),
    ("B^{4}_{bx=0}B^{128}_{tx=0}[C^{f32,g}_{bx,tx}=A^{f32,g}_{bx,tx};D^{f32,g}_{bx,tx}=C^{f32,g}_{bx,127-tx};];",
     128, True),
])
def test_plan_serialises_only_threads_that_would_race(body, n, serial):
    from lowering.cuda_plan import plan_cuda
    outs = {"C": (F, (4, n))} if "D^" not in body else {"D": (F, (4, n))}
    p = _p(body, {"A": (F, (4, 1024))}, outs)
    plan = plan_cuda(p)
    assert bool(plan.serialised) == serial, plan.serialised
    if serial:
        assert all(r.startswith("threads of threadIdx.x would race on") for _, _, r in plan.serialised)


def test_ieee_compile_has_no_fast_math_instructions(tmp_path):
    """--use_fast_math made powf(x, 3) exp2(3*log2(x)): NaN for negative x (half of MinGPT's GELU)."""
    from lowering.cudacc import nvcc_path
    if nvcc_path() is None:
        pytest.skip("nvcc not on PATH")
    from lowering.tir import cuda_ptx, cuda_source
    p = _p("B^{32}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}**3.0/exp(A^{f32,g}_{tx});];", {"A": (F, (32,))},
           {"C": (F, (32,))})
    ptx = cuda_ptx(cuda_source(p))
    assert ".entry main_kernel" in ptx
    for fast in ("lg2.approx", "div.approx", "div.full", "mul.ftz", "add.ftz"):
        assert fast not in ptx, fast
