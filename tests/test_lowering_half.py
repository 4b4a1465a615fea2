"""Half-precision programs: functions LLVM lacks in f16 are computed in f32 and rounded once."""
import math

import numpy as np

from engine.leir.files import parse_leir_file

GELU16 = """input  A f16[4, 64]
output C f16[4, 64]
B^{4}_{tx=0}L^{64}_{a=0}[C^{f16,g}_{tx,a}=A^{f16,g}_{tx,a}*0.5*(1+erf(A^{f16,g}_{tx,a}/sqrt(2)));];
"""


def test_f16_erf_builds_and_matches_the_exact_gelu(tvm):
    from lowering.run import run_program
    from lowering.tir import lower_to_tvmscript
    p = parse_leir_file(GELU16, "gelu16.leir")
    assert 'T.Cast("float16", T.erf(' in lower_to_tvmscript(p)
    a = np.random.default_rng(0).standard_normal((4, 64)).astype("float16")
    out = run_program(p, {"A": a})["C"]
    assert out.dtype == np.float16
    x = a.astype(np.float64)
    ref = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    # a few f16 roundings of values below 4 in magnitude
    assert np.abs(out.astype(np.float64) - ref).max() < 8 * 2.0 ** -10 * 4
