"""Check a translated program against torch eager: the program runs on TVM (``lowering.run``),
the module runs in torch, and ``lowering.verify.compare`` judges each trial (strict,
dtype-aware tolerance). Each trial draws fresh inputs from a seeded generator."""
from __future__ import annotations

from typing import Callable

from engine.leir.diagnostics import LeirError

from .graph import Translation, to_numpy


def verify_translation(tr: Translation, model, make_inputs: Callable[[int], tuple], trials: int = 3,
                       seed: int = 0, target: str = "llvm", tolerance: str = "strict") -> dict:
    """Run ``tr.program`` and ``model`` on ``make_inputs(seed + t)`` for each trial ``t``.

    Returns a JSON-serialisable dict shaped like ``lowering.verify.VerifyResult.to_dict()``
    (program, target, trials_requested, seed, tolerance, build, exec, equal, max_abs_err,
    max_rel_err, trials, error) with ``reference: "torch"``.
    """
    import torch

    from lowering.errors import LoweringError
    from lowering.run import build, run_built
    from lowering.verify import (
        REFERENCE_FORMULA,
        STRICT_FORMULA,
        compare,
        reduction_length,
    )

    prog = tr.program
    n = reduction_length(prog)
    out = prog.outputs[0]
    res = {"program": prog.name, "reference": "torch", "target": target, "trials_requested": trials,
           "seed": seed, "tolerance": {"mode": tolerance, "reduction_length": n,
                                       "formula": STRICT_FORMULA if tolerance == "strict" else REFERENCE_FORMULA},
           "build": None, "exec": None, "equal": None, "max_abs_err": None, "max_rel_err": None,
           "trials": [], "error": None}
    try:
        built = build(prog, target)
    except LoweringError as e:
        res.update(build=False, equal=False, error={"stage": "build", "message": e.message})
        return res
    res["build"] = True
    worst_abs = worst_rel = 0.0
    equal = True
    for t in range(trials):
        inputs = make_inputs(seed + t)
        expected = _eager(model, inputs)
        if not isinstance(expected, torch.Tensor):
            raise LeirError("the model's output is not a single tensor")
        try:
            actual = run_built(built, prog, tr.feed(*inputs))[out.name]
        except LoweringError as e:
            res.update(exec=False, equal=False, error={"stage": "exec", "message": e.message})
            return res
        c = compare(actual, to_numpy(expected).reshape(out.shape), out.dtype, n, tolerance)
        res["trials"].append({"trial": t, "seed": seed + t, "equal": c.equal, "max_abs_err": c.max_abs_err,
                              "max_rel_err": c.max_rel_err, "mismatches": c.mismatches})
        equal = equal and c.equal
        worst_abs = max(worst_abs, c.max_abs_err)
        worst_rel = max(worst_rel, c.max_rel_err)
    res.update(exec=True, equal=equal, max_abs_err=worst_abs, max_rel_err=worst_rel)
    return _json_safe(res)


def _eager(model, inputs):
    """torch's result; where CPU torch has no float16/bfloat16 kernel for an op, the module runs
    in float32 and the result is rounded to the low-precision dtype."""
    import copy

    import torch
    with torch.no_grad():
        try:
            return model(*inputs)
        except (NotImplementedError, RuntimeError) as ex:
            low = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in (torch.float16,
                                                                                       torch.bfloat16)]
            if not low or "not implemented for" not in str(ex):
                raise
            m32 = copy.deepcopy(model).float()
            xs = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            return m32(*xs).to(low[0])


def _json_safe(x):
    import math
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x
