"""Steps that change nothing on the target: with ``--target cuda`` a row whose generated CUDA
source is the parent's (modulo names) is ``noop_on_target`` (issue 20, item 7).

Both sources come from ``lowering.tir.cuda_source`` (no GPU needed). Before comparing, the
names the program chose are replaced by their order of first appearance: kernel parameters
(``X_ptr``), loop variables (``for (int a = ...``) and local declarations (``float x_local[4]``),
so a step that renames a tensor or a loop variable and nothing else is a no-op too. Nothing
else is normalised (builtins, intrinsics, constants, launch bounds, kernel count and order all
count): a false "changed" only keeps a row, a false "unchanged" would drop a real one.

``noop_on_target`` is ``null`` on llvm rows: the comparison is not made there (the TIR text is
not the machine code, and a CPU kernel is not generated without compiling it).
"""
from __future__ import annotations

import re

KERNELS = re.compile(r'extern "C" __global__')
DECLARED = (
    re.compile(r"\b(\w+_ptr)\b"),                                           # kernel parameters
    re.compile(r"\bfor \((?:int|int64_t|unsigned|long) (\w+) ="),          # loop variables
    re.compile(r"(?:^|[;{(\s])(?:__shared__\s+)?(?:float|half|double|int|int64_t|bool|signed char|uchar|"
               r"char|short|ushort|uint|long|float\d|half\d|int\d)\s+(\w+)\s*[\[=;]", re.M),  # locals
)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def normalise(source: str) -> str:
    """The kernels of a CUDA source (the common preamble dropped) with declared names replaced
    by ``n0, n1, ...`` in order of first appearance."""
    m = KERNELS.search(source)
    body = source[m.start():] if m else source
    names: set[str] = set()
    for pattern in DECLARED:
        names.update(pattern.findall(body))
    order: dict[str, str] = {}

    def rename(mo: re.Match) -> str:
        w = mo.group(0)
        if w not in names:
            return w
        return order.setdefault(w, f"n{len(order)}")

    return WORD.sub(rename, body)


def noop_on_target(target: str, parent_cuda: str | None, candidate_cuda: str | None) -> bool | None:
    """True when the step leaves the target's generated kernel unchanged, False when it changes
    it, None when no comparison is made (llvm)."""
    if target != "cuda" or parent_cuda is None or candidate_cuda is None:
        return None
    return normalise(parent_cuda) == normalise(candidate_cuda)
