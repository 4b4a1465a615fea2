"""Operator families (dataset.families) over the whole corpus and the workload library, and
``dataset.generate --split-by family`` on a small job: no family has programs in both splits,
where the split by type puts Matmul_with_transposed_A and _B on both sides."""
import json
from pathlib import Path

from conftest import ROOT

from dataset.assembly.assemble import held_out_types
from dataset.families import FAMILIES, family, normalized, table_family

CORPUS_FAMILIES = {
    "attention": ["GQA_Gemm_Tanh", "MHA_Gemm_ReLU", "MQA_Gemm", "MQA_mean"],
    "convolution": ["Conv2d_BatchNorm_Scaling", "Conv2d_InstanceNorm_Divide", "Conv2d_Subtract_Subtract_Mish",
                    "Conv3d_HardSwish_ReLU_Softmax_Mean", "Conv3d_Softmax_MaxPool_MaxPool", "conv1d_conv1d_padding",
                    "conv_depthwise_2D_asymmetric_input_asymmetric_kernel",
                    "conv_depthwise_2D_asymmetric_input_square_kernel",
                    "conv_depthwise_2D_square_input_asymmetric_kernel", "conv_depthwise_2D_square_input_square_kernel",
                    "conv_depthwise_separable_2D", "conv_pointwise_2D", "conv_standard_1D",
                    "conv_standard_1D_dilated_strided", "conv_standard_2D__asymmetric_input__asymmetric_kernel",
                    "conv_standard_2D__asymmetric_input__square_kernel",
                    "conv_standard_2D__square_input__asymmetric_kernel",
                    "conv_standard_2D__square_input__square_kernel",
                    "conv_standard_2D_square_input_asymmetric_kernel___dilated____padded",
                    "conv_standard_3D__asymmetric_input__asymmetric_kernel",
                    "conv_standard_3D__asymmetric_input__square_kernel",
                    "conv_standard_3D__square_input__asymmetric_kernel",
                    "conv_standard_3D__square_input__square_kernel"],
    "elementwise": ["ELU", "GELU", "HardSigmoid", "HardTanh", "LeakyReLU", "Matrix_scalar_multiplication",
                    "MinGPTNewGelu", "ReLU", "SELU", "Sigmoid", "Softplus", "Softsign", "Swish", "Tanh"],
    "loss": ["CosineSimilarityLoss", "CrossEntropyLoss", "Hingeloss", "HuberLoss", "KLDivLoss", "MSELoss",
             "TripletMarginLoss"],
    "matmul": ["BMM_InstanceNorm_Sum_ResidualAdd_Multiply", "Batched_matrix_multiplication",
               "Gemm_BatchNorm_Scaling_Softmax", "Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU",
               "Gemm_Sigmoid_Sum_LogSumExp", "Matmul3D", "Matmul4D", "Matmul_BatchNorm_BiasAdd_Divide_Swish",
               "Matmul_Min_Subtract", "Matmul_Swish_Scaling", "Matmul_for_lower_triangular_matrices",
               "Matmul_for_symmetric_matrices", "Matmul_for_upper_triangular_matrices", "Matmul_with_diagonal_mat",
               "Matmul_with_irregular_shapes", "Matmul_with_large_K_dimension", "Matmul_with_small_K_dimension",
               "Matmul_with_transposed_A", "Matmul_with_transposed_B", "Matmul_with_transposed_both",
               "Matrix_vector_multiplication", "Square_matrix_multiplication", "Standard_matrix_multiplication",
               "Tall_skinny_matrix_multiplication", "log_log"],
    "normalization": ["BatchNorm", "FrobeniusNorm", "GroupNorm", "InstanceNorm", "L1Norm", "L2Norm", "LayerNorm",
                      "RMSNorm"],
    "pooling": ["Average_Pooling_1D", "Average_Pooling_2D", "Average_Pooling_3D", "Max_Pooling_1D", "Max_Pooling_2D",
                "Max_Pooling_3D"],
    "reduction": ["Argmax_over_a_dimension", "Argmin_over_a_dimension", "Mean_reduction_over_a_dimension",
                  "Product_reduction_over_a_dimension", "Sum_reduction_over_a_dimension"],
    "scan": ["cumprod", "cumsum", "cumsum_exclusive", "cumsum_reverse", "masked_cumsum"],
    "softmax": ["LogSoftmax", "softmax"],
}


def corpus_names() -> list[str]:
    return [json.loads(line)["name"] for line in (ROOT / "examples/corpus/programs.jsonl").read_text().splitlines()]


def test_every_corpus_program_has_its_family_from_the_table():
    names = corpus_names()
    got: dict[str, list[str]] = {}
    for n in names:
        assert table_family(n) is not None, n              # none falls to the default (a family of one)
        got.setdefault(family(n), []).append(n)
    assert {f: sorted(ns) for f, ns in got.items()} == CORPUS_FAMILIES
    assert set(CORPUS_FAMILIES) <= {f for f, _ in FAMILIES}


def test_workloads_kernelbench_files_and_examples_are_in_the_table():
    from dataset.workloads import registry
    unmatched = [n for n in registry() if table_family(n) is None]
    assert unmatched == []
    files = sorted(p.stem for p in (ROOT / "benchmarks/kernelbench").glob("*.py"))
    assert [family(f) for f in files] == ["matmul", "matmul", "softmax", "attention"], files  # 12_Gemm_, 1_, 23_, 97_
    assert normalized("1_Square_matrix_multiplication_") == "square_matrix_multiplication"
    assert {family(p.stem) for p in (ROOT / "examples").glob("*.leir")} == {
        "attention", "convolution", "normalization", "matmul", "softmax"}
    assert family("my_new_kernel") == "my_new_kernel"      # unknown: a family of its own


def test_a_split_by_family_never_straddles_a_family_on_the_corpus():
    names = corpus_names()
    for seed in range(5):
        for fraction in (0.1, 0.3):
            held = held_out_types(names, seed, fraction, family)
            train_fams = {family(n) for n in names if n not in held}
            assert held and train_fams and not train_fams & {family(n) for n in held}
    # by type (the default), siblings land on both sides
    held = held_out_types(names, 0, 0.3)
    straddle = {family(n) for n in held} & {family(n) for n in names if n not in held}
    assert "matmul" in straddle


TINY = [
    ("Matmul_with_transposed_A", [4, 4], "B^{4}_{tx=0}L^{4}_{a=0}L^{4}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{c,tx}*C^{f32,g}_{c,a};];"),
    ("Matmul_with_transposed_B", [4, 4], "B^{4}_{tx=0}L^{4}_{a=0}L^{4}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{a,c};];"),
    ("ReLU", [4, 8], "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);];"),
    ("Sigmoid", [4, 8], "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=1/(1+exp(-A^{f32,g}_{tx,a}));];"),
]


def _program(name, shape, leir):
    ins = [{"name": "A", "dtype": "f32", "shape": shape}]
    if name.startswith("Matmul"):
        ins.append({"name": "C", "dtype": "f32", "shape": shape})
    return {"name": name, "inputs": ins, "outputs": [{"name": "D", "dtype": "f32", "shape": shape}], "leir": leir}


def _splits(out: Path) -> dict[str, set]:
    by: dict[str, set] = {}
    for line in (out / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        by.setdefault(r["program"]["name"], set()).add(r["split"])
    return by


def test_generate_split_by_family_holds_out_whole_families(tmp_path):
    from dataset.generate import driver
    src = tmp_path / "programs.jsonl"
    src.write_text("".join(json.dumps(_program(*p)) + "\n" for p in TINY))
    out = tmp_path / "ds"
    args = [str(src), "-o", str(out), "--per-program", "1", "--seed", "0", "--test-fraction", "0.5", "--no-plots",
            "--timeout", "120"]
    assert driver.main(args + ["--split-by", "family"]) == 0
    splits = _splits(out)
    assert set(splits) == {n for n, _, _ in TINY}                          # a verified row of every program
    fam_splits: dict[str, set] = {}
    for name, s in splits.items():
        fam_splits.setdefault(family(name), set()).update(s)
    assert all(len(s) == 1 for s in fam_splits.values()), fam_splits
    assert {frozenset(s) for s in fam_splits.values()} == {frozenset({"train"}), frozenset({"test"})}
    stats = json.loads((out / "stats.json").read_text())
    test_fam = next(f for f, s in fam_splits.items() if s == {"test"})
    assert stats["splits"]["split_by"] == "family" and stats["splits"]["test_families"] == [test_fam]
    assert stats["splits"]["families"] == {"train": 1, "test": 1} and stats["job"]["split_by"] == "family"
    assert "Whole operator families (`--split-by family`) are held out" in (out / "README.md").read_text()
    # the same job split by type (assembled again from the journal): the two matmuls land on both sides
    assert driver.main(args + ["--split-by", "type"]) == 0
    splits = _splits(out)
    assert splits["Matmul_with_transposed_A"] != splits["Matmul_with_transposed_B"]
    assert json.loads((out / "stats.json").read_text())["splits"]["split_by"] == "type"
