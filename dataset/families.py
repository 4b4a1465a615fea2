"""Operator families of programs, so that a held-out split holds out whole families.

Programs of one family differ in a transposed operand, a shape or a fused epilogue
(``Matmul_with_transposed_A``, ``..._B``, ``..._both``): a model trained on two of them and tested
on the third is tested on what it has seen. ``dataset.generate --split-by family`` holds out
whole families (``dataset.assembly.assemble.held_out_types``).

A program's family is read from its name (a corpus, workload or KernelBench name; a leading
``NN_`` of a KernelBench file is dropped, case is ignored): the first row of ``FAMILIES`` whose
pattern occurs in it. The rows go from the heaviest operator to the lightest, so a fused chain
belongs to the family of its heaviest operator: ``Conv2d_GroupNorm_Tanh`` is a convolution,
``Gemm_Sigmoid_Sum_LogSumExp`` a matrix product, ``RMSNorm_Linear`` a matrix product. A name no
row matches is a family of its own (the split is then by type, as without families).
"""
from __future__ import annotations

import re

# (family, pattern searched in the lower-cased name), heaviest operator first: the first match names it
FAMILIES: tuple[tuple[str, str], ...] = (
    ("attention", r"attention|sdpa|multihead|(^|_)(mqa|mha|gqa)(_|$)"),
    ("convolution", r"conv|resnet|mobilenet|lenet"),
    # log_log is log(A) @ log(C): a batched product whose name says only its prologue
    ("matmul", r"gemm|mat_?mul|bmm|(matrix|vector)_multiplication|linear|addmm|einsum|mlp|ffn|^log_log$"),
    ("loss", r"loss"),
    ("normalization", r"norm"),
    ("pooling", r"pool"),
    ("softmax", r"softmax|logsumexp"),
    ("scan", r"cum(sum|prod)"),
    ("reduction", r"reduction|arg(max|min)|amax|max_with_indices|^std_|^variance$|^sum_all$"),
    ("elementwise", r"elu|sigmoid|tanh|swish|silu|softplus|softsign|mish|hard|clamp|scalar_multiplication"
                    r"|^(abs|exp|log|sqrt)$"),
)
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in FAMILIES)
_KERNELBENCH_NUMBER = re.compile(r"^\d+_")


def normalized(name: str) -> str:
    """The name as the patterns see it: lower case, without a KernelBench file's number and
    trailing underscores (``1_Square_matrix_multiplication_`` -> ``square_matrix_multiplication``)."""
    return _KERNELBENCH_NUMBER.sub("", name.strip()).strip("_").lower()


def table_family(name: str) -> str | None:
    """The family ``FAMILIES`` gives a program name, or None when no row matches."""
    text = normalized(name)
    return next((fam for fam, pattern in _COMPILED if pattern.search(text)), None)


def family(name: str) -> str:
    """A program's operator family: the table's, else the normalised name itself (a family of one)."""
    return table_family(name) or normalized(name)
