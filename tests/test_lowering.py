"""LEIR -> TVM TIR lowering: expected TIR text, execution against numpy, cuda source, corpus sweep."""
import math
import re
import shutil

import numpy as np
import pytest

from engine.leir.ast import equations
from engine.leir.files import program_from_json
from lowering.errors import LoweringError
from lowering.inputs import random_inputs
from lowering.tir import cuda_ptx, cuda_source, lower, lower_to_tvmscript
from conftest import corpus_records


def P(leir, inputs, outputs, name="t"):
    """A program from LEIR text and {name: (dtype, shape)} declarations."""
    decl = lambda d: [{"name": n, "dtype": t, "shape": list(s)} for n, (t, s) in d.items()]  # noqa: E731
    return program_from_json({"name": name, "inputs": decl(inputs), "outputs": decl(outputs), "leir": leir})


F = "f32"
MATMUL = P("B^{8}_{tx=0}L^{12}_{a=0}L^{16}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
           {"A": (F, (8, 16)), "C": (F, (16, 12))}, {"D": (F, (8, 12))}, "matmul")
SOFTMAX = P("B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
            "B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
            "B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];",
            {"A": (F, (4, 64))}, {"C": (F, (4, 64))}, "softmax")
PADCONV = P("B^{2}_{tx=0}L^{3}_{a=0}L^{12}_{c=0}[H^{f32,g}_{tx,a,c}=if_then_else(2<=c<10,A^{f32,g}_{tx,a,c-2},0);];"
            "B^{2}_{tx=0}L^{4}_{a=0}L^{10}_{c=0}L^{3}_{d=0}L^{3}_{f=0}"
            "[D^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+H^{f32,g}_{tx,d,c+f}*G^{f32,g}_{a,d,f};];",
            {"A": (F, (2, 3, 8)), "G": (F, (4, 3, 3))}, {"D": (F, (2, 4, 10))}, "padconv")
SCOPED = P("B^{4}_{bx=0}[B^{8}_{tx=0}[X^{f32,s}_{bx,tx}=A^{f32,g}_{bx,tx}*2;];"
           "B^{8}_{tx=0}[Y^{f32,l}_{bx,tx}=exp(X^{f32,s}_{bx,7-tx});C^{f32,g}_{bx,tx}=Y^{f32,l}_{bx,tx}+1;];];",
           {"A": (F, (4, 8))}, {"C": (F, (4, 8))}, "scoped")


# --------------------------------------------------------------------------- expected TIR text

MATMUL_TIR = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((16, 12), "float32"), D: T.Buffer((8, 12), "float32")):
    T.func_attr({"tir.noalias": True})
    for tx in T.parallel(8):
        for a, c in T.grid(12, 16):
            with T.sblock("D"):
                v_tx, v_a, v_c = T.axis.remap("SSR", [tx, a, c])
                with T.init():
                    D[v_tx, v_a] = T.float32(0)
                D[v_tx, v_a] = D[v_tx, v_a] + A[v_tx, v_c] * C[v_c, v_a]
'''

PADCONV_TIR = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((2, 3, 8), "float32"), G: T.Buffer((4, 3, 3), "float32"), D: T.Buffer((2, 4, 10), "float32"), H: T.Buffer((2, 3, 12), "float32")):
    T.func_attr({"tir.noalias": True})
    for tx in T.parallel(2):
        for a, c in T.grid(3, 12):
            with T.sblock("H"):
                v_tx, v_a, v_c = T.axis.remap("SSS", [tx, a, c])
                H[v_tx, v_a, v_c] = T.if_then_else(2 <= v_c and v_c < 10, A[v_tx, v_a, v_c - 2], T.float32(0))
    for tx in T.parallel(2):
        for a, c, d, f in T.grid(4, 10, 3, 3):
            with T.sblock("D"):
                v_tx, v_a, v_c, v_d, v_f = T.axis.remap("SSSRR", [tx, a, c, d, f])
                with T.init():
                    D[v_tx, v_a, v_c] = T.float32(0)
                D[v_tx, v_a, v_c] = D[v_tx, v_a, v_c] + H[v_tx, v_d, v_c + v_f] * G[v_a, v_d, v_f]
'''

SCOPED_CUDA_TIR = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        with T.sblock("alloc_0"):
            T.reads(A[0:4, 0:8])
            T.writes(C[0:4, 0:8])
            X = T.alloc_buffer((8,), "float32", scope="shared")
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                with T.sblock("X"):
                    v_bx, v_tx = T.axis.remap("SS", [bx, tx])
                    X[v_tx] = A[v_bx, v_tx] * T.float32(2)
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                with T.sblock("alloc_0_1"):
                    T.reads(X[0:8])
                    T.writes(C[0:4, 0:8])
                    Y = T.alloc_buffer((), "float32", scope="local")
                    with T.sblock("Y"):
                        v_bx, v_tx = T.axis.remap("SS", [bx, tx])
                        Y[()] = T.exp(X[7 - v_tx])
                    with T.sblock("C"):
                        v_bx, v_tx = T.axis.remap("SS", [bx, tx])
                        C[v_bx, v_tx] = Y[()] + T.float32(1)
'''


def test_matmul_tir_text():
    assert lower_to_tvmscript(MATMUL) == MATMUL_TIR


def test_padded_conv_tir_text_has_guarded_read_and_init():
    assert lower_to_tvmscript(PADCONV) == PADCONV_TIR


def test_scoped_buffers_are_allocated_inside_the_kernel():
    text = lower_to_tvmscript(SCOPED, "cuda")
    assert text == SCOPED_CUDA_TIR
    # llvm: same placement, block-index loop parallel, thread loops serial (they share X)
    llvm = lower_to_tvmscript(SCOPED, "llvm")
    assert "for bx in T.parallel(4):" in llvm and "for tx in range(8):" in llvm
    assert 'X = T.alloc_buffer((8,), "float32", scope="shared")' in llvm


def test_softmax_structurally_equal_to_handwritten(tvm):
    # on llvm a float32 exp is written as arithmetic (lowering.vecmath), its variables declared
    # in the block that uses it
    from lowering.vecmath import VARS, exp_f32

    def exp(arg: str, k: int, indent: str) -> tuple:
        names = tuple(f"_e{k}{tag}" for tag, _ in VARS)
        decls = "".join(f"{indent}{n} = T.{dtype}()\n" for n, (_, dtype) in zip(names, VARS))
        return decls, exp_f32(arg, names)

    pad = " " * 16
    d0, e0 = exp("A[vi, vk] - D[vi]", 0, pad)
    d1, e1 = exp("A[vi, vk] - D[vi]", 1, pad)
    hand = f'''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 64), "float32"), C: T.Buffer((4, 64), "float32"), D: T.Buffer((4,), "float32"),
         E: T.Buffer((4,), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for i in T.parallel(4):
        for k in range(64):
            with T.sblock("D"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    D[vi] = T.float32("-inf")
                D[vi] = T.max(D[vi], A[vi, vk])
    for i in T.parallel(4):
        for k in range(64):
            with T.sblock("E"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    E[vi] = T.float32(0)
{d0}                E[vi] = E[vi] + {e0}
    for i in T.parallel(4):
        for k in range(64):
            with T.sblock("C"):
                vi, vk = T.axis.remap("SS", [i, k])
{d1}                C[vi, vk] = {e1} / E[vi]
'''
    tvm.ir.assert_structural_equal(lower(SOFTMAX), tvm.script.from_source(hand))
    # elsewhere exp stays the intrinsic
    assert "T.exp(" in lower_to_tvmscript(SOFTMAX, "cuda") and "T.exp(" not in lower_to_tvmscript(SOFTMAX)


def test_text_is_deterministic():
    assert lower_to_tvmscript(SOFTMAX) == lower_to_tvmscript(P(SOFTMAX.to_leir(), {"A": (F, (4, 64))},
                                                                {"C": (F, (4, 64))}))


def test_reduction_over_bound_axis_stays_serial_on_llvm():
    p = P("B^{16}_{tx=0}[S^{f32,g}=S^{f32,g}+A^{f32,g}_{tx};];B^{1}_{tx=0}[C^{f32,g}=S^{f32,g};];",
          {"A": (F, (16,))}, {"C": (F, ())})
    text = lower_to_tvmscript(p)
    assert "T.parallel" not in text
    assert 'T.axis.remap("R", [tx])' in text and "S[()] = S[()] + A[v_tx]" in text


def test_loop_kinds_and_python_keyword_names():
    p = P("P^{4}_{in=0}U^{2}_{a=0}V^{8}_{c=0}[C^{f32,g}_{in,a,c}=A^{f32,g}_{in,a,c}+1;];",
          {"A": (F, (4, 2, 8))}, {"C": (F, (4, 2, 8))})
    text = lower_to_tvmscript(p)
    assert "for in_ in T.parallel(4):" in text and "for a in T.unroll(2):" in text
    assert "for c in T.vectorized(8):" in text
    assert "for c in range(8):" in lower_to_tvmscript(p, vectorize=False)


def test_mixed_dtypes_are_explicit_casts():
    p = P("B^{1}_{tx=0}[O^{f64,g}=16;];B^{1}_{tx=0}[Q^{f64,g}=sqrt(O^{f64,g});];"
          "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*Q^{f64,g}+a*M^{bool,g}_{tx,a};];",
          {"A": (F, (4, 8)), "M": ("bool", (4, 8))}, {"C": (F, (4, 8))})
    text = lower_to_tvmscript(p)
    assert 'C[v_tx, v_a] = T.Cast("float32", T.Cast("float64", A[v_tx, v_a]) * Q[()] + ' \
           'T.Cast("float64", T.Cast("float32", v_a) * T.Cast("float32", M[v_tx, v_a])))' in text
    assert "O[()] = T.float64(16)" in text


# --------------------------------------------------------------------------- execution vs numpy


def run(p, inputs):
    from lowering.run import run_program
    return run_program(p, inputs)


def _rng(k=0):
    return np.random.default_rng(1234 + k)


def test_exec_matmul(tvm):
    a, c = _rng().standard_normal((8, 16), dtype=np.float32), _rng(1).standard_normal((16, 12), dtype=np.float32)
    np.testing.assert_allclose(run(MATMUL, {"A": a, "C": c})["D"], a @ c, rtol=1e-5, atol=1e-5)


def test_exec_batched_matmul(tvm):
    p = P("B^{2}_{tx=0}L^{4}_{a=0}L^{6}_{c=0}L^{8}_{d=0}[D^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+A^{f32,g}_{tx,a,d}*C^{f32,g}_{tx,d,c};];",
          {"A": (F, (2, 4, 8)), "C": (F, (2, 8, 6))}, {"D": (F, (2, 4, 6))})
    a, c = _rng().standard_normal((2, 4, 8), dtype=np.float32), _rng(1).standard_normal((2, 8, 6), dtype=np.float32)
    np.testing.assert_allclose(run(p, {"A": a, "C": c})["D"], a @ c, rtol=1e-5, atol=1e-5)


def test_exec_softmax(tvm):
    a = _rng().standard_normal((4, 64), dtype=np.float32) * 5
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(run(SOFTMAX, {"A": a})["C"], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_exec_layer_norm(tvm):
    p = P("B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}+A^{f32,g}_{tx,a,c};];"
          "B^{2}_{tx=0}[G^{f32,g}_{tx}=F^{f32,g}_{tx}/12;];"
          "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}[H^{f32,g}_{tx}=H^{f32,g}_{tx}+(A^{f32,g}_{tx,a,c}-G^{f32,g}_{tx})**2;];"
          "B^{2}_{tx=0}[I^{f32,g}_{tx}=H^{f32,g}_{tx}/12;];"
          "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}[C^{f32,g}_{tx,a,c}=D^{f32,g}_{a,c}*((A^{f32,g}_{tx,a,c}-G^{f32,g}_{tx})"
          "/sqrt(I^{f32,g}_{tx}+1e-05))+E^{f32,g}_{a,c};];",
          {"A": (F, (2, 3, 4)), "D": (F, (3, 4)), "E": (F, (3, 4))}, {"C": (F, (2, 3, 4))})
    a, d, e = (_rng(k).standard_normal(s, dtype=np.float32) for k, s in enumerate([(2, 3, 4), (3, 4), (3, 4)]))
    m = a.mean((1, 2), keepdims=True)
    v = ((a - m) ** 2).mean((1, 2), keepdims=True)
    np.testing.assert_allclose(run(p, {"A": a, "D": d, "E": e})["C"], d * (a - m) / np.sqrt(v + 1e-5) + e,
                               rtol=1e-5, atol=1e-5)


def test_exec_padded_conv1d(tvm):
    a, g = _rng().standard_normal((2, 3, 8), dtype=np.float32), _rng(1).standard_normal((4, 3, 3), dtype=np.float32)
    h = np.pad(a, ((0, 0), (0, 0), (2, 2)))
    want = np.stack([sum(np.einsum("td,ad->ta", h[:, :, c + f], g[:, :, f]) for f in range(3)) for c in range(10)], -1)
    np.testing.assert_allclose(run(PADCONV, {"A": a, "G": g})["D"], want, rtol=1e-5, atol=1e-5)


def test_exec_conv2d(tvm):
    p = P("B^{2}_{tx=0}L^{4}_{a=0}L^{6}_{c=0}L^{6}_{d=0}L^{3}_{f=0}L^{3}_{g=0}L^{3}_{h=0}"
          "[C^{f32,g}_{tx,a,c,d}=C^{f32,g}_{tx,a,c,d}+D^{f32,g}_{a,f,g,h}*A^{f32,g}_{tx,f,c+g,d+h};];",
          {"A": (F, (2, 3, 8, 8)), "D": (F, (4, 3, 3, 3))}, {"C": (F, (2, 4, 6, 6))})
    a, w = _rng().standard_normal((2, 3, 8, 8), dtype=np.float32), _rng(1).standard_normal((4, 3, 3, 3), dtype=np.float32)
    want = np.zeros((2, 4, 6, 6), np.float32)
    for g in range(3):
        for h in range(3):
            want += np.einsum("tfcd,af->tacd", a[:, :, g:g + 6, h:h + 6], w[:, :, g, h])
    np.testing.assert_allclose(run(p, {"A": a, "D": w})["C"], want, rtol=1e-4, atol=1e-4)


def test_exec_max_pool_with_padding(tvm):
    p = P("B^{1}_{tx=0}L^{2}_{a=0}L^{10}_{c=0}L^{10}_{d=0}[D^{f32,g}_{tx,a,c,d}=if_then_else(1<=c<9&1<=d<9,"
          "A^{f32,g}_{tx,a,c-1,d-1},-inf);];B^{1}_{tx=0}L^{2}_{a=0}L^{5}_{c=0}L^{5}_{d=0}L^{2}_{f=0}L^{2}_{g=0}"
          "[C^{f32,g}_{tx,a,c,d}=max(C^{f32,g}_{tx,a,c,d},D^{f32,g}_{tx,a,c*2+f,d*2+g});];",
          {"A": (F, (1, 2, 8, 8))}, {"C": (F, (1, 2, 5, 5))})
    a = _rng().standard_normal((1, 2, 8, 8), dtype=np.float32)
    d = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = d.reshape(1, 2, 5, 2, 5, 2).max((3, 5))
    np.testing.assert_array_equal(run(p, {"A": a})["C"], want)


def test_exec_argmax_i64_output(tvm):
    p = P("B^{2}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,c}=max(D^{f32,g}_{tx,c},A^{f32,g}_{tx,a,c});C^{i64,g}_{tx,c}=0;];"
          "B^{2}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[C^{i64,g}_{tx,c}=if_then_else(A^{f32,g}_{tx,a,c}>=D^{f32,g}_{tx,c},a,C^{i64,g}_{tx,c});];",
          {"A": (F, (2, 6, 5))}, {"C": ("i64", (2, 5))})
    a = _rng().standard_normal((2, 6, 5), dtype=np.float32)
    out = run(p, {"A": a})["C"]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, a.argmax(1))


def test_exec_cumsum_and_masked_cumsum(tvm):
    p = P("B^{3}_{tx=0}L^{10}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*M^{bool,g}_{tx,a};];"
          "B^{3}_{tx=0}L^{10}_{a=0}L^{10}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+if_then_else(c<=a,D^{f32,g}_{tx,c},0);];",
          {"A": (F, (3, 10)), "M": ("bool", (3, 10))}, {"C": (F, (3, 10))})
    a, m = _rng().standard_normal((3, 10), dtype=np.float32), _rng(1).integers(0, 2, (3, 10)).astype(bool)
    np.testing.assert_allclose(run(p, {"A": a, "M": m})["C"], np.cumsum(a * m, 1), rtol=1e-5, atol=1e-6)


def test_exec_gelu_erf(tvm):
    from math import erf
    p = P("B^{4}_{tx=0}L^{32}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*0.5*(1+erf(A^{f32,g}_{tx,a}/sqrt(2)));];",
          {"A": (F, (4, 32))}, {"C": (F, (4, 32))})
    a = _rng().standard_normal((4, 32), dtype=np.float32) * 3
    want = np.vectorize(lambda x: x * 0.5 * (1 + erf(x / math.sqrt(2))))(a.astype(np.float64))
    np.testing.assert_allclose(run(p, {"A": a})["C"], want, rtol=1e-5, atol=1e-6)


def test_exec_cross_entropy_gather_with_i64_index_rank0_output(tvm):
    p = P("B^{16}_{tx=0}L^{10}_{a=0}[F^{f32,g}_{tx}=max(F^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
          "B^{16}_{tx=0}L^{10}_{a=0}[G^{f32,g}_{tx}=G^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-F^{f32,g}_{tx});];"
          "B^{16}_{tx=0}L^{10}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}-F^{f32,g}_{tx}-log(G^{f32,g}_{tx});];"
          "B^{10}_{tx=0}[H^{i64,g}_{tx}=if_then_else(tx!=-100,1,0);];"
          "B^{16}_{tx=0}[I^{f32,g}_{tx}=-H^{i64,g}_{C^{i64,g}_{tx}}*E^{f32,g}_{tx,C^{i64,g}_{tx}};];"
          "B^{16}_{tx=0}[J^{i64,g}=J^{i64,g}+H^{i64,g}_{C^{i64,g}_{tx}};];"
          "B^{16}_{tx=0}[D^{f32,g}=D^{f32,g}+I^{f32,g}_{tx}/J^{i64,g};];",
          {"A": (F, (16, 10)), "C": ("i64", (16,))}, {"D": (F, ())})
    inputs = random_inputs(p, seed=3)
    assert inputs["C"].dtype == np.int64 and inputs["C"].min() >= 0 and inputs["C"].max() < 10
    a, c = inputs["A"].astype(np.float64), inputs["C"]
    logp = a - a.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    out = run(p, inputs)["D"]
    assert out.shape == ()
    np.testing.assert_allclose(out, -logp[np.arange(16), c].mean(), rtol=1e-5)


def test_exec_rank0_reduction_hinge(tvm):
    p = P("B^{32}_{tx=0}[D^{f32,g}_{tx}=max(1-A^{f32,g}_{tx}*C^{f32,g}_{tx},0);];"
          "B^{32}_{tx=0}[H^{f32,g}=H^{f32,g}+D^{f32,g}_{tx};];B^{1}_{tx=0}[G^{f32,g}=H^{f32,g}/32;];",
          {"A": (F, (32,)), "C": (F, (32,))}, {"G": (F, ())})
    a, c = _rng().standard_normal(32, dtype=np.float32), _rng(1).standard_normal(32, dtype=np.float32)
    np.testing.assert_allclose(run(p, {"A": a, "C": c})["G"], np.maximum(1 - a * c, 0).mean(), rtol=1e-5)


def test_exec_mixed_dtype_f64_scalar(tvm):
    p = P("B^{1}_{tx=0}[O^{f64,g}=16;];B^{1}_{tx=0}[Q^{f64,g}=1.0/sqrt(O^{f64,g});];"
          "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*Q^{f64,g};];",
          {"A": (F, (4, 8))}, {"C": (F, (4, 8))})
    a = _rng().standard_normal((4, 8), dtype=np.float32)
    np.testing.assert_array_equal(run(p, {"A": a})["C"], (a.astype(np.float64) * 0.25).astype(np.float32))


def test_exec_scoped_buffers_and_vectorized_loop(tvm):
    a = _rng().standard_normal((4, 8), dtype=np.float32)
    np.testing.assert_allclose(run(SCOPED, {"A": a})["C"], np.exp(2 * a[:, ::-1]) + 1, rtol=1e-6)
    p = P("P^{4}_{in=0}U^{2}_{a=0}V^{8}_{c=0}[C^{f32,g}_{in,a,c}=A^{f32,g}_{in,a,c}+1;];",
          {"A": (F, (4, 2, 8))}, {"C": (F, (4, 2, 8))})
    x = _rng().standard_normal((4, 2, 8), dtype=np.float32)
    np.testing.assert_array_equal(run(p, {"A": x})["C"], x + 1)


def test_llvm_result_follows_sequential_semantics_for_loop_carried_reads(tvm):
    # a prefix recurrence along the bound axis: tx must not run in parallel
    p = P("B^{6}_{tx=0}[C^{f32,g}_{tx}=if_then_else(tx-1<0,0,C^{f32,g}_{tx-1})+A^{f32,g}_{tx};];",
          {"A": (F, (6,))}, {"C": (F, (6,))})
    assert "T.parallel" not in lower_to_tvmscript(p)
    a = _rng().standard_normal(6, dtype=np.float32)
    np.testing.assert_allclose(run(p, {"A": a})["C"], np.cumsum(a), rtol=1e-6)


def test_inputs_are_seeded_and_positive_where_logged():
    p = P("B^{4}_{tx=0}[C^{f32,g}_{tx}=log(A^{f32,g}_{tx})+B^{f32,g}_{tx};];".replace("B^{f32", "Q^{f32").replace(
        "B^{f32,g}_{tx};", "Q^{f32,g}_{tx};"), {"A": (F, (4,)), "Q": (F, (4,))}, {"C": (F, (4,))})
    x, y = random_inputs(p, 5), random_inputs(p, 5)
    assert all(np.array_equal(x[k], y[k]) for k in x)
    assert (x["A"] >= 0.5).all() and not np.array_equal(random_inputs(p, 5, trial=1)["A"], x["A"])


# --------------------------------------------------------------------------- errors and cuda


def test_unplaceable_local_buffer_is_a_typed_error_on_cuda():
    p = P("B^{4}_{tx=0}L^{8}_{a=0}[Y^{f32,l}_{a}=A^{f32,g}_{tx,a};];B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=Y^{f32,l}_{a};];",
          {"A": (F, (4, 8))}, {"C": (F, (4, 8))})
    with pytest.raises(LoweringError, match="local buffer 'Y' is used by top-level statements 1, 2"):
        lower_to_tvmscript(p, "cuda")
    assert 'Y: T.Buffer((8,), "float32")' in lower_to_tvmscript(p, "llvm")  # CPU: global fallback (scratch)


def test_cuda_source_for_softmax_and_statement_without_bound_loop(tvm):
    src = cuda_source(SOFTMAX)
    assert "__global__" in src and "threadIdx.x" in src and "expf" in src
    p = P("L^{4}_{a=0}L^{8}_{c=0}[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a,c};];", {"A": (F, (4, 8))}, {"C": (F, (4,))})
    assert 'for b_launch in T.thread_binding(1, thread="blockIdx.x"):' in lower_to_tvmscript(p, "cuda")
    assert "__global__" in cuda_source(p)
    scoped = cuda_source(SCOPED)
    assert re.search(r"__shared__ .*float X_ptr\[8\]", scoped) and "__syncthreads()" in scoped
    assert "X_ptr," not in scoped.split("{", 1)[0]  # not a kernel parameter


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_ptx_with_nvcc(tvm):
    ptx = cuda_ptx(cuda_source(MATMUL), "sm_90")
    assert ".target sm_90" in ptx and ".entry" in ptx


def test_tir_cli(capsys, tmp_path):
    from lowering.tir.__main__ import main
    f = tmp_path / "m.leir"
    f.write_text(MATMUL.to_leir_file())
    assert main([str(f)]) == 0
    assert capsys.readouterr().out == MATMUL_TIR
    bad = tmp_path / "bad.leir"
    bad.write_text(MATMUL.to_leir_file().replace("+A^", "+Z^"))
    assert main([str(bad)]) == 2
    assert re.match(r".*bad\.leir:\d+:\d+: error: ", capsys.readouterr().err)


# --------------------------------------------------------------------------- corpus


def _points(p):
    return sum(math.prod(l.extent for l in loops) for loops, _ in equations(p.body))


@pytest.mark.slow
def test_corpus_builds_and_runs_on_llvm(tvm):
    import time
    from engine.leir.files import program_from_json as pj
    from lowering.run import run_program
    progs = [pj(r) for r in corpus_records()]
    small = [p for p in progs if _points(p) <= 2 ** 27]
    if not small:
        pytest.skip("corpus not available")
    ok, failures = 0, []
    t0 = time.time()
    for p in small:
        try:
            out = run_program(p, random_inputs(p, 0))
            assert set(out) == {d.name for d in p.outputs}
            ok += 1
        except LoweringError as e:
            failures.append((p.name, e.stage, e.message))
    rate = ok / len(small)
    print(f"\ncorpus llvm: {ok}/{len(small)} programs (<= 2^27 points) built and ran in {time.time() - t0:.1f} s")
    assert rate >= 0.95, failures
    assert all(m for _, _, m in failures)


# --------------------------------------------------------------------------- composite LHS index


SPLIT_SUM = P("L^{2}_{f=0}B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{f*4+tx}=D^{f32,g}_{f*4+tx}+A^{f32,g}_{f*4+tx,c};];",
              {"A": (F, (8, 8))}, {"D": (F, (8,))}, "split_sum")
SPLIT_SUM_TIR = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8,), "float32")):
    T.func_attr({"tir.noalias": True})
    for f in range(2):
        for tx in T.parallel(4):
            for c in range(8):
                with T.sblock("D"):
                    v_f, v_tx, v_c = T.axis.remap("SSR", [f, tx, c])
                    v_f_4_tx = T.axis.spatial(8, f * 4 + tx)
                    with T.init():
                        D[v_f_4_tx] = T.float32(0)
                    D[v_f_4_tx] = D[v_f_4_tx] + A[v_f_4_tx, v_c]
'''
HALVES = P("B^{2}_{tx=0}L^{3}_{c=0}L^{8}_{a=0}[X^{f32,g}_{tx,a//2}=max(X^{f32,g}_{tx,a//2},A^{f32,g}_{tx,c,a});];"
           "B^{2}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=X^{f32,g}_{tx,a};];",
           {"A": (F, (2, 3, 8))}, {"C": (F, (2, 4))}, "halves")
HALVES_TIR = '''@T.prim_func(s_tir=True)
def main(A: T.Buffer((2, 3, 8), "float32"), C: T.Buffer((2, 4), "float32"), X: T.Buffer((2, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    for tx, a in T.grid(2, 8):
        with T.sblock("X_init"):
            v_tx, v_a = T.axis.remap("SS", [tx, a])
            X[v_tx, T.floordiv(v_a, 2)] = T.float32("-inf")
    for tx in T.parallel(2):
        for c, a in T.grid(3, 8):
            with T.sblock("X"):
                v_tx, v_c, v_a = T.axis.remap("SRS", [tx, c, a])
                X[v_tx, T.floordiv(v_a, 2)] = T.max(X[v_tx, T.floordiv(v_a, 2)], A[v_tx, v_c, v_a])
    for tx in T.parallel(2):
        for a in range(4):
            with T.sblock("C"):
                v_tx, v_a = T.axis.remap("SS", [tx, a])
                C[v_tx, v_a] = X[v_tx, v_a]
'''


def test_injectivity_of_lhs_index_maps():
    from engine.leir.parser import parse_body
    from lowering.injective import is_injective

    def idx(text):  # the LHS index of a one-equation body
        return parse_body(f"L^{{1}}_{{a=0}}[X^{{f32,g}}_{{{text}}}=0;];")[0].body[0].lhs.index

    ext = {"f": 2, "tx": 4, "a": 8, "c": 3, "d": 1}
    assert is_injective(idx("f*4+tx"), ext)
    assert is_injective(idx("tx+f*4"), ext)
    assert is_injective(idx("f*(-4)+tx+7"), ext)          # signs do not matter for mixed radix
    assert is_injective(idx("f*4+tx,c"), ext)
    assert is_injective(idx("a//2,a%2"), ext)             # by enumeration
    assert is_injective(idx("d*5+c"), ext)                # extent-1 variables are fixed
    assert is_injective(idx("a,a+c,c"), ext)               # variables determined across entries
    assert not is_injective(idx("f*3+tx"), ext)           # f=1,tx=0 and f=0,tx=3 collide
    assert not is_injective(idx("a//2"), ext)
    assert not is_injective(idx("a+c"), ext)
    assert not is_injective(idx("a%4,c"), ext)
    big = {"a": 1 << 12, "c": 1 << 12}
    assert is_injective(idx("a*4096+c"), big)             # symbolic, no enumeration
    assert not is_injective(idx("a//2+c*2048,a%2"), big)  # undecided above the enumeration limit: no


def test_split_reduction_tir_uses_spatial_axis_and_init():
    assert lower_to_tvmscript(SPLIT_SUM) == SPLIT_SUM_TIR


def test_exec_split_reduction(tvm):
    a = _rng().standard_normal((8, 8), dtype=np.float32)
    np.testing.assert_allclose(run(SPLIT_SUM, {"A": a})["D"], a.sum(1), rtol=1e-5, atol=1e-5)


def test_exec_split_reduction_without_reduction_axis_and_tiled_2d(tvm):
    p = P("L^{2}_{f=0}L^{4}_{g=0}[D^{f32,g}_{f*4+g}=D^{f32,g}_{f*4+g}+A^{f32,g}_{f*4+g};];",
          {"A": (F, (8,))}, {"D": (F, (8,))})
    a = _rng().standard_normal((8,), dtype=np.float32)
    np.testing.assert_array_equal(run(p, {"A": a})["D"], a)
    q = P("L^{2}_{f=0}L^{3}_{g=0}L^{2}_{h=0}L^{4}_{c=0}[D^{f32,g}_{f*2+h,g}=D^{f32,g}_{f*2+h,g}*A^{f32,g}_{f*2+h,g,c};];",
          {"A": (F, (4, 3, 4))}, {"D": (F, (4, 3))})
    assert "T.axis.spatial(4, f * 2 + h)" in lower_to_tvmscript(q)
    a = _rng().standard_normal((4, 3, 4), dtype=np.float32)
    np.testing.assert_allclose(run(q, {"A": a})["D"], a.prod(2), rtol=1e-6, atol=0)


def test_shared_reduction_into_composite_index_is_initialised_up_front():
    assert lower_to_tvmscript(HALVES) == HALVES_TIR
    cuda = lower_to_tvmscript(HALVES, "cuda")
    assert 'for b_launch in T.thread_binding(1, thread="blockIdx.x"):\n        for tx, a in T.grid(2, 8):\n' \
           '            with T.sblock("X_init"):' in cuda


def test_exec_shared_reduction_into_composite_index(tvm):
    a = _rng().standard_normal((2, 3, 8), dtype=np.float32)
    np.testing.assert_array_equal(run(HALVES, {"A": a})["C"], a.reshape(2, 3, 4, 2).max((1, 3)))
    p = P("B^{2}_{tx=0}L^{8}_{a=0}[X^{f32,g}_{tx,a//2}=X^{f32,g}_{tx,a//2}+A^{f32,g}_{tx,a};];"
          "B^{2}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=X^{f32,g}_{tx,a};];",
          {"A": (F, (2, 8))}, {"C": (F, (2, 4))})
    a = _rng(1).standard_normal((2, 8), dtype=np.float32)
    np.testing.assert_allclose(run(p, {"A": a})["C"], a.reshape(2, 4, 2).sum(2), rtol=1e-6, atol=1e-6)


def test_cuda_source_for_composite_index_reductions(tvm):
    p = P("B^{2}_{bx=0}B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{bx*4+tx}=D^{f32,g}_{bx*4+tx}+A^{f32,g}_{bx*4+tx,c};];",
          {"A": (F, (8, 8))}, {"D": (F, (8,))})
    src = cuda_source(p)
    assert "if (c == 0) {" in src and "__global__" in src
    assert "__global__" in cuda_source(HALVES)


@pytest.mark.parametrize("leir, inputs, outputs, why", [
    ("L^{8}_{a=0}[X^{f32,g}_{a//2}=X^{f32,g}_{a//2}+A^{f32,g}_{a};X^{f32,g}_{a//2+4}=A^{f32,g}_{a};];"
     "L^{8}_{a=0}[C^{f32,g}_{a}=X^{f32,g}_{a};];", {"A": (F, (8,))}, {"C": (F, (8,))}, "also writes 'X'"),
    ("B^{4}_{bx=0}[L^{8}_{a=0}[X^{f32,s}_{bx,a//2}=X^{f32,s}_{bx,a//2}+A^{f32,g}_{bx,a};];"
     "L^{4}_{a=0}[C^{f32,g}_{bx,a}=X^{f32,s}_{bx,a};];];", {"A": (F, (4, 8))}, {"C": (F, (4, 4))},
     "allocated inside the statement"),
])
def test_non_injective_reduction_that_cannot_be_initialised_is_refused(leir, inputs, outputs, why):
    with pytest.raises(LoweringError, match="composite index that several spatial iterations share") as e:
        lower_to_tvmscript(P(leir, inputs, outputs))
    assert why in e.value.message and e.value.line == 1


def test_tvm_error_summary_names_the_cause():
    from lowering.tir import first_line
    e = Exception("error: Program is not well-formed. If this is deliberate, ...\n"
                  "Traceback: ValueError: Invalid use of undefined variable v_b at <root>.functions\n"
                  " --> <str>:1:1\n   |  \n 1 |  @T.prim_func(s_tir=True)\n   |   ")
    assert first_line(e) == "ValueError: Invalid use of undefined variable v_b at <root>.functions"
    assert first_line(Exception("error: something\n |")) == "error: something"


def test_tiled_loops_vectorise_and_parallelise_when_each_iteration_owns_its_element():
    # after a tile D_{tx*4+d, a*16+f}: f owns its element through the affine entry a*16+f
    p = P("B^{2}_{tx=0}L^{2}_{a=0}L^{8}_{c=0}U^{4}_{d=0}V^{16}_{f=0}"
          "[D^{f32,g}_{tx*4+d,a*16+f}=D^{f32,g}_{tx*4+d,a*16+f}+A^{f32,g}_{tx*4+d,c}*C^{f32,g}_{c,a*16+f};];",
          {"A": (F, (8, 8)), "C": (F, (8, 32))}, {"D": (F, (8, 32))})
    text = lower_to_tvmscript(p)
    assert "for tx in T.parallel(2):" in text and "for d in T.unroll(4):" in text
    assert "for f in T.vectorized(16):" in text
    # a read of the written tensor at another element keeps the loop serial
    q = P("B^{2}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];"
          "B^{2}_{tx=0}L^{2}_{a=0}V^{4}_{f=0}[D^{f32,g}_{tx,a*4+f}=D^{f32,g}_{tx,a*4+f}+D^{f32,g}_{tx,a};];",
          {"A": (F, (2, 8))}, {"D": (F, (2, 8))})
    assert "T.vectorized" not in lower_to_tvmscript(q)


def test_exec_tiled_vectorised_matmul(tvm):
    p = P("B^{2}_{tx=0}L^{2}_{a=0}L^{8}_{c=0}U^{4}_{d=0}V^{16}_{f=0}"
          "[D^{f32,g}_{tx*4+d,a*16+f}=D^{f32,g}_{tx*4+d,a*16+f}+A^{f32,g}_{tx*4+d,c}*C^{f32,g}_{c,a*16+f};];",
          {"A": (F, (8, 8)), "C": (F, (8, 32))}, {"D": (F, (8, 32))})
    a = _rng().standard_normal((8, 8), dtype=np.float32)
    c = _rng().standard_normal((8, 32), dtype=np.float32)
    np.testing.assert_allclose(run(p, {"A": a, "C": c})["D"], a @ c, rtol=1e-5, atol=1e-5)


def test_llvm_builds_for_this_machines_cpu(monkeypatch):
    import lowering.run as lr
    monkeypatch.setattr(lr, "_HOST", {})
    monkeypatch.delenv(lr.MCPU_ENV, raising=False)
    import tvm
    assert lr.llvm_cpu() == str(tvm.target.codegen.llvm_get_system_cpu())
    monkeypatch.setattr(lr, "_HOST", {})
    monkeypatch.setenv(lr.MCPU_ENV, "no-such-cpu")
    with pytest.raises(LoweringError, match="LEIR_LLVM_MCPU"):
        lr.llvm_cpu()
    monkeypatch.setattr(lr, "_HOST", {})
    monkeypatch.setenv(lr.MCPU_ENV, "generic")
    assert str(lr.llvm_target().kind.name) == "llvm" and "mcpu" not in str(lr.llvm_target())


EXP_VEC = P("B^{2}_{tx=0}L^{256}_{b=0}V^{16}_{a=0}[C^{f32,g}_{tx,b*16+a}=exp(A^{f32,g}_{tx,b*16+a});];",
            {"A": (F, (2, 4096))}, {"C": (F, (2, 4096))}, "exp_vec")


def _exp_inputs():
    rng = _rng()
    special = [-np.inf, np.inf, np.nan, 0.0, -0.0, 88.72283935546875, 88.72283172607421875, -104.0,
               -103.97, -87.3, 1e-30, -1e-30, 87.0, -87.0, 0.5, -0.5]
    a = np.concatenate([special, rng.uniform(-110, 90, 2000), rng.uniform(-1, 1, 2000),
                        rng.standard_normal(8192 - 4000 - len(special)) * 10])
    return a.astype(np.float32).reshape(2, 4096)


def test_exp_is_vector_arithmetic_on_llvm_and_plain_exp_on_cuda():
    text = lower_to_tvmscript(EXP_VEC)
    assert "T.exp(" not in text and "T.reinterpret" in text and "for a in T.vectorized(16):" in text
    assert "            _e0a = T.float32()" in text          # declared in the block that uses it
    assert "T.exp(" in lower_to_tvmscript(EXP_VEC, "cuda")


def test_exec_exp_within_one_ulp_special_values_exact_and_vector_equals_scalar(tvm):
    a = _exp_inputs()
    got = run(EXP_VEC, {"A": a})["C"]
    serial = P(EXP_VEC.to_leir().replace("V^{16}", "L^{16}"), {"A": (F, (2, 4096))}, {"C": (F, (2, 4096))})
    assert "T.vectorized" not in lower_to_tvmscript(serial)
    assert np.array_equal(got.view(np.uint32), run(serial, {"A": a})["C"].view(np.uint32))
    with np.errstate(over="ignore"):
        ref = np.exp(a.astype(np.float64))
        ref32 = ref.astype(np.float32)
    normal = np.isfinite(ref32) & (np.abs(ref32) >= np.finfo(np.float32).tiny)
    ulp = np.abs(got[normal].astype(np.float64) - ref[normal]) / np.spacing(ref32[normal])
    assert ulp.max() <= 1.0
    sub = np.isfinite(ref32) & ~normal & (ref32 != 0)
    assert sub.sum() > 10 and np.abs(got[sub].astype(np.float64) - ref[sub]).max() <= 2 * 2.0 ** -149
    special = ~normal & ~sub            # inf, 0 and NaN exactly
    assert np.array_equal(got[special], ref32[special], equal_nan=True)
