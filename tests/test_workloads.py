"""The workload library: 189 program types in four categories, seeded shape/dtype sampling,
deterministic instances, and translation of every type at its test shapes."""
import pytest

torch = pytest.importorskip("torch")

from dataset.workloads import CATEGORIES, DTYPES, instantiate, registry, sample  # noqa: E402


def test_library_has_the_papers_189_types_in_four_categories():
    reg = registry()
    assert len(reg) == 189
    cats = {w.category for w in reg.values()}
    assert cats == set(CATEGORIES)
    for w in reg.values():
        if w.category == "composite":
            assert 2 <= len(w.components) <= 5, w.name
        assert set(w.vary) <= set(w.shapes), w.name
        assert set(w.test_shapes) == set(w.shapes), w.name


def test_sampling_is_seeded_and_varies():
    w = registry()["Standard_matrix_multiplication"]
    assert sample(w, 3) == sample(w, 3)
    draws = [sample(w, s) for s in range(12)]
    assert len({tuple(sorted(d[0].items())) for d in draws}) > 1
    assert {d[1] for d in draws} <= set(DTYPES) and len({d[1] for d in draws}) > 1
    for shapes, _ in draws:
        for k in w.vary:
            assert w.shapes[k] // 2 <= shapes[k] <= 2 * w.shapes[k]


def test_instances_are_deterministic_and_run():
    w = registry()["Conv2d_ReLU_BiasAdd"]
    a = instantiate(w, w.test_shapes, "f64", seed=1)
    b = instantiate(w, w.test_shapes, "f64", seed=1)
    xa, xb = a.inputs(5), b.inputs(5)
    assert xa[0].dtype == torch.float64 and torch.equal(xa[0], xb[0])
    with torch.no_grad():
        assert torch.equal(a.model(*xa), b.model(*xb))
    assert not torch.equal(a.inputs(6)[0], xa[0])


def test_every_type_translates_at_test_shapes():
    from dataset.translate import translate
    from engine.leir.diagnostics import LeirError
    failed = []
    for name, w in sorted(registry().items()):
        inst = instantiate(w, w.test_shapes, "f32")
        try:
            tr = translate(inst.model, inst.inputs(0), name)
        except LeirError as e:
            failed.append((name, e.message))
            continue
        assert tr.program.outputs[0].shape == tuple(inst.model(*inst.inputs(0)).shape), name
    assert failed == []
