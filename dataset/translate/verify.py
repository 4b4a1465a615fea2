"""Check a translated program against torch eager: torch computes the expected outputs in this
process, ``lowering.Verifier.verify_against`` runs the program on TVM and judges each trial
(strict, dtype-aware tolerance by default). Each trial draws fresh inputs from a seeded
generator."""
from __future__ import annotations

from typing import Callable

from engine.leir.diagnostics import LeirError

from .graph import Translation, to_numpy

_IN_PROCESS = {}        # target -> a Verifier running in this process (torch is here anyway)


def verify_translation(tr: Translation, model, make_inputs: Callable[[int], tuple], trials: int = 3,
                       seed: int = 0, target: str = "llvm", tolerance: str = "strict", verifier=None) -> dict:
    """Run ``tr.program`` and ``model`` on ``make_inputs(seed + t)`` for each trial ``t``.

    Returns the ``Verdict`` as JSON (equal, reason, message, tolerance, trials, max_abs_err,
    max_rel_err, build, exec) plus ``program``, ``reference: "torch"``, ``seed``,
    ``trials_requested`` and ``error`` (``{stage, message}`` when it did not build or run).
    ``verifier``: a ``lowering.Verifier`` to use (default: one in this process)."""
    import torch

    from lowering import Verifier
    prog = tr.program
    out = prog.outputs[0]
    feeds, expected = [], []
    for t in range(trials):
        inputs = make_inputs(seed + t)
        result = _eager(model, inputs)
        if not isinstance(result, torch.Tensor):
            raise LeirError("the model's output is not a single tensor")
        feeds.append(tr.feed(*inputs))
        expected.append({out.name: to_numpy(result).reshape(out.shape)})
    if verifier is None:
        verifier = _IN_PROCESS.get(target)
        if verifier is None:
            verifier = _IN_PROCESS[target] = Verifier(target=target, isolate=False)
    verdict = verifier.verify_against(prog, feeds, expected, tolerance)
    res = verdict.to_json()
    stage = {"build failed": "build", "execution failed": "exec", "timeout": "exec", "crashed": "exec"}.get(verdict.reason)
    res.update(program=prog.name, reference="torch", seed=seed, trials_requested=trials,
               error={"stage": stage, "message": verdict.message} if stage else None)
    for t, trial in enumerate(res["trials"]):
        trial["seed"] = seed + t
    return res


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
