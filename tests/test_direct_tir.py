"""Issue 40 item 2, no text in the loop: the PrimFunc the lowering's script builds through TVM's IR
builder (``lowering.tir.prim_func``, ``lower_prim_func``) is the one TVM parses from its text:
structurally equal and printed alike (names included: they name the variables of the generated
code), for every example, a seeded corpus sample and its ``vectorize=False`` forms, programs that
reach every construct the script writes, and rewrites of the corpus, on llvm and cuda (static: no
GPU). The text is rendered only when asked, and the compiled code is the same."""
import random
import time

import pytest

from conftest import EXAMPLES, corpus_records

TARGETS = ("llvm", "cuda")
SEED = 40


def _same(tvm, program, target, vectorize=True) -> tuple[float, float]:
    """Assert the direct PrimFunc equals the parsed one; (seconds to parse, seconds to build directly)."""
    from lowering.tir import from_tvmscript, lower_module, prim_func
    low = lower_module(program, target, vectorize)
    t0 = time.perf_counter()
    direct = prim_func(low)
    t1 = time.perf_counter()
    assert "text" not in vars(low), "the direct path rendered the text"
    text = low.text
    t2 = time.perf_counter()
    parsed = from_tvmscript(text)
    t3 = time.perf_counter()
    tvm.ir.assert_structural_equal(direct, parsed)
    assert direct.script() == parsed.script()
    return t3 - t2, t1 - t0


def _corpus(n: int) -> list:
    from engine.leir.files import program_from_json
    records = corpus_records()
    if not records:
        pytest.skip("corpus not available")
    return [program_from_json(r) for r in random.Random(SEED).sample(records, min(n, len(records)))]


def _program(text: str, name: str):
    from engine.leir.files import parse_leir_file
    return parse_leir_file(text, f"{name}.leir")


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.leir")), ids=lambda p: p.stem)
def test_examples_build_directly_as_parsed(tvm, path, target, vectorize):
    from engine.leir.files import load_programs
    for p in load_programs(path):
        _same(tvm, p, target, vectorize)


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_sample_builds_directly_as_parsed(tvm, target):
    for p in _corpus(6):
        _same(tvm, p, target)


# Programs that reach what the corpus does not: a composite reduction index (T.axis.spatial), an
# up-front initialisation nest, shared and local buffers (T.reads/T.writes), a CUDA all-reduce,
# half precision with float32 accumulators rounded into an output (T.where on cuda: 305 elements),
# logic, chained comparisons, integer and float division, literals of every kind, exp as vecmath.
CONSTRUCTS = {
    "split": """input  A f32[8, 8]
output D f32[8]
L^{2}_{f=0}B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{f*4+tx}=D^{f32,g}_{f*4+tx}+A^{f32,g}_{f*4+tx,c};];
""",
    "halves": """input  A f32[2, 3, 8]
output C f32[2, 4]
B^{2}_{tx=0}L^{3}_{c=0}L^{8}_{a=0}[X^{f32,g}_{tx,a//2}=max(X^{f32,g}_{tx,a//2},A^{f32,g}_{tx,c,a});];
B^{2}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=X^{f32,g}_{tx,a};];
""",
    "scoped": """input  A f32[4, 8]
output C f32[4, 8]
B^{4}_{bx=0}[B^{8}_{tx=0}[X^{f32,s}_{bx,tx}=A^{f32,g}_{bx,tx}*2;];B^{8}_{tx=0}[Y^{f32,l}_{bx,tx}=exp(X^{f32,s}_{bx,7-tx});C^{f32,g}_{bx,tx}=Y^{f32,l}_{bx,tx}+1;];];
""",
    "allreduce": """input  A f32[8, 64]
input  C f32[8, 64]
output D f32[]
L^{8}_{a=0}B^{64}_{tx=0}[G^{f32,g}=G^{f32,g}-A^{f32,g}_{a,tx}+C^{f32,g}_{a,tx};];
B^{1}_{tx=0}[D^{f32,g}=G^{f32,g}*2;];
""",
    "half": """input  A f16[5, 512]
input  W bf16[512, 61]
output D f16[5, 61]
output E bf16[5]
B^{5}_{tx=0}L^{61}_{a=0}L^{512}_{c=0}[D^{f16,g}_{tx,a}=D^{f16,g}_{tx,a}+A^{f16,g}_{tx,c}*W^{bf16,g}_{c,a};];
B^{5}_{tx=0}L^{512}_{a=0}[E^{bf16,g}_{tx}=max(E^{bf16,g}_{tx},A^{f16,g}_{tx,a}*0.5);];
""",
    "logic": """input  A f32[4, 8]
input  M bool[4, 8]
input  I i32[4, 8]
output C f32[4, 8]
output K i32[4]
output N i64[4]
output Q bool[4, 8]
B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=if_then_else((1<=a<7)&M^{bool,g}_{tx,a}|(a==0),A^{f32,g}_{tx,a}//0.5+A^{f32,g}_{tx,a}%1.5,-A^{f32,g}_{tx,a}**3);];
B^{4}_{tx=0}L^{8}_{a=0}[K^{i32,g}_{tx}=max(K^{i32,g}_{tx},I^{i32,g}_{tx,a}//3+I^{i32,g}_{tx,a}%2);];
B^{4}_{tx=0}L^{8}_{a=0}[N^{i64,g}_{tx}=min(N^{i64,g}_{tx},I^{i32,g}_{tx,a}*2.5);];
B^{4}_{tx=0}L^{8}_{a=0}[Q^{bool,g}_{tx,a}=(A^{f32,g}_{tx,a}>0)|M^{bool,g}_{tx,a}&(I^{i32,g}_{tx,a}!=1);];
""",
    "literals": """input  A f32[4, 8]
output J i32[4]
output Z bool[4]
output C f32[4, 8]
B^{4}_{tx=0}[J^{i32,g}_{tx}=2.5+tx;Z^{bool,g}_{tx}=1;];
U^{4}_{tx=0}V^{8}_{a=0}[C^{f32,g}_{tx,a}=min(A^{f32,g}_{tx,a},inf)+exp(-A^{f32,g}_{tx,a})+log(abs(A^{f32,g}_{tx,a})+1)+sqrt(abs(A^{f32,g}_{tx,a}))+erf(A^{f32,g}_{tx,a})-a;];
""",
}
# what the script of each construct program writes on each target (so none of them is vacuous)
MARKERS = {
    "split": ["T.axis.spatial("],
    "halves": ['T.sblock("X_init")', "T.floordiv("],
    "scoped": ["T.reads(", "T.writes(", 'scope="local"', "T.alloc_buffer("],
    "allreduce": ["G[()] = G[()]"],
    "half": ["acc_D", 'T.sblock("D_round")', '"bfloat16"', 'T.bfloat16("-inf")'],
    "logic": [" and ", " or ", " != ", "T.pow(", "T.floormod(", " - T.floor(", "T.min_value(", "T.max_value(",
              '"int64"', "-T.pow("],
    "literals": ["T.bool(True)", 'T.float32("inf")', "T.log(", "T.sqrt(", "T.erf(", "T.abs(", "T.unroll("],
}
TARGET_MARKERS = {
    ("half", "cuda"): ["T.where("], ("allreduce", "cuda"): ["G[()] = G[()] + ("], ("scoped", "cuda"): ['scope="shared"'], ("literals", "llvm"): ["T.Let(", "T.vectorized("],
    ("literals", "cuda"): ["T.exp("],
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_every_construct_builds_directly_as_parsed(tvm, name, target):
    from lowering.tir import lower_to_tvmscript
    p = _program(CONSTRUCTS[name], name)
    text = lower_to_tvmscript(p, target)
    missing = [m for m in MARKERS[name] + TARGET_MARKERS.get((name, target), []) if m not in text]
    assert missing == [], text
    _same(tvm, p, target)
    _same(tvm, p, target, vectorize=False)


def test_compiled_code_is_the_same(tvm):
    """llvm: the same machine code (the IR differs only in debug line numbers: the parser's spans);
    cuda: the same CUDA source."""
    from engine.leir.files import load_programs
    from lowering.cudacc import cuda_target
    from lowering.run import compile_tir
    from lowering.tir import from_tvmscript, lower_module, pass_config, prim_func
    p = load_programs(EXAMPLES / "softmax.leir")[0]
    low = lower_module(p, "llvm")
    asm = [compile_tir(f, "llvm").mod.inspect_source("asm") for f in (prim_func(low), from_tvmscript(low.text))]
    assert asm[0] == asm[1] and "main" in asm[0]
    low = lower_module(p, "cuda")
    src = []
    for f in (prim_func(low), from_tvmscript(low.text)):
        with tvm.transform.PassContext(config=pass_config("cuda")):
            src.append(tvm.tirx.build(f, target=cuda_target("sm_90")).imports[0].inspect_source())
    assert src[0] == src[1] and "__global__" in src[0]


def test_lower_prim_func_gives_the_function_and_its_lowering(tvm):
    from lowering.tir import from_tvmscript, lower_prim_func, lower_to_tvmscript
    p = _program(CONSTRUCTS["literals"], "literals")
    f, low = lower_prim_func(p, "llvm")
    assert low.vectorized and "T.vectorized(" in low.text and low.text == lower_to_tvmscript(p)
    tvm.ir.assert_structural_equal(f, from_tvmscript(low.text))
    f, low = lower_prim_func(p, "llvm", vectorize=False)
    assert not low.vectorized and "T.vectorized(" not in low.text
    _, low = lower_prim_func(_program(CONSTRUCTS["half"], "half"), "cuda")
    assert [name for name, _, _ in low.scratch] == ["acc_D"]


def test_what_tvm_rejects_is_a_lowering_error_on_both_paths():
    """A literal Python does not read (``007``) fails to parse as text and to build directly."""
    from lowering.errors import LoweringError
    from lowering.tir import from_tvmscript, lower_module, prim_func
    low = lower_module(_program("input  A f32[4]\noutput C f32[4]\nL^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*007;];\n",
                                "zeros"))
    for build in (prim_func, lambda lw: from_tvmscript(lw.text)):
        with pytest.raises(LoweringError, match="TVM rejected the generated TIR: .*leading zeros") as e:
            build(low)
        assert e.value.stage == "build"


@pytest.mark.slow
def test_corpus_sweep_builds_directly_as_parsed(tvm, capsys):
    """40 seeded corpus programs, vectorised and not, on both targets; prints the time of each path."""
    parse = direct = 0.0
    for p in _corpus(40):
        for target in TARGETS:
            for vectorize in (True, False):
                tp, td = _same(tvm, p, target, vectorize)
                parse, direct = parse + tp, direct + td
    with capsys.disabled():
        print(f"\n160 lowerings: TVMScript parse {parse:.2f} s, direct build {direct:.2f} s")


@pytest.mark.slow
def test_corpus_rewrites_build_directly_as_parsed(tvm):
    """A strategy-stratified seeded sample of one-step rewrites of the corpus (splits, tiles,
    shared and local buffers, ...), on both targets."""
    from neighbour_sample import corpus_programs, stratified_neighbours
    if not corpus_records():
        pytest.skip("corpus not available")
    sample = stratified_neighbours(corpus_programs(), 4)
    assert len(sample) >= 100
    for _, step in sample:
        for target in TARGETS:
            _same(tvm, step.program, target)
