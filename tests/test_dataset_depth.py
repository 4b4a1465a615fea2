"""Rows from intermediate states (``--depth``) and target-aware rows (``noop_on_target``), issue 20
items 1 and 7: rows at depth 1 and 2 replay from their path (``engine.apply --steps`` and
``dataset.check``), the source's rows are those of a depth-1 job, the output does not depend on
``--workers``, a tampered path fails the check where it breaks, and with ``--target cuda`` a
step that leaves the kernel unchanged is marked, dropped unless ``--keep-noop``, and counted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_dataset_generate import PROGRAMS as GENERATE_PROGRAMS
from test_dataset_generate import lines, outputs

from dataset.check import checker
from dataset.generate import driver
from dataset.generate.noop import noop_on_target, normalise

PROGRAMS = {name: GENERATE_PROGRAMS[name] for name in ("softmax.leir", "matmul.leir")}
ARGS = ["--per-program", "2", "--seed", "1", "--test-fraction", "0", "--timeout", "120", "--no-plots"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sources")
    for name, text in PROGRAMS.items():
        (d / name).write_text(text)
    return d


@pytest.fixture(scope="module")
def deep(sources, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("deep")
    assert driver.main([str(sources), "-o", str(out), *ARGS, "--depth", "3", "--walks", "2"]) == 0
    return out


def test_rows_at_every_depth_replay_from_their_path(deep, tmp_path, capsys):
    rows = lines(deep, "rows.jsonl")
    by_id = {r["id"]: r for r in rows}
    depths = {r["state"]["depth"] for r in rows}
    assert depths == {0, 1, 2}
    assert len(by_id) == len(rows)                     # ids differ for the same step at different states
    for r in rows:
        st = r["state"]
        assert len(st["path"]) == st["depth"]
        if st["depth"] == 0:
            assert st == {"depth": 0, "path": [], "parent": None}
            continue
        parent = by_id[st["parent"]]
        assert parent["transformed"] == r["program"]["leir"]
        assert [s["key"] for s in st["path"]] == [s["key"] for s in parent["state"]["path"]] + \
            [parent["step"]["key"]]
    stats = json.loads((deep / "stats.json").read_text())
    assert stats["depth"]["rows_per_depth"] == {str(d): sum(r["state"]["depth"] == d for r in rows)
                                                for d in sorted(depths)}
    assert stats["depth"]["states"] <= 2 * (1 + 2 * 2)           # the bound: 1 + W*(D-1) per program
    # engine.apply --steps takes a row's path as it is and gives the row's program
    from engine import apply
    r = next(r for r in rows if r["state"]["depth"] == 2)
    src = next(x for x in rows if x["state"]["depth"] == 0 and x["program"]["name"] == r["program"]["name"])
    (tmp_path / "src.json").write_text(json.dumps(src["program"]))
    (tmp_path / "path.jsonl").write_text("".join(json.dumps(s) + "\n" for s in r["state"]["path"]))
    capsys.readouterr()
    assert apply.main([str(tmp_path / "src.json"), "--steps", str(tmp_path / "path.jsonl")]) == 0
    assert capsys.readouterr().out.strip() == r["program"]["leir"]
    report = checker.check(deep, sample=2, progress=False)
    assert report.problems == []
    assert report.counts["states replayed"] == len(rows)


def test_the_source_rows_are_those_of_a_depth_1_job(sources, deep, tmp_path):
    assert driver.main([str(sources), "-o", str(tmp_path), *ARGS]) == 0
    flat = lines(tmp_path, "rows.jsonl")
    assert all(r["state"] == {"depth": 0, "path": [], "parent": None} for r in flat)
    assert all(r["noop_on_target"] is None for r in flat)          # llvm: no comparison made
    assert [r for r in lines(deep, "rows.jsonl") if r["state"]["depth"] == 0] == flat


def test_depth_output_does_not_depend_on_workers(sources, deep, tmp_path):
    assert driver.main([str(sources), "-o", str(tmp_path), *ARGS, "--depth", "3", "--walks", "2",
                          "--workers", "2"]) == 0
    assert outputs(tmp_path) == outputs(deep)


def test_a_tampered_path_fails_the_check_where_it_breaks(deep, tmp_path):
    import shutil
    out = tmp_path / "copy"
    shutil.copytree(deep, out)
    rows = lines(out, "rows.jsonl")
    no, r = next((i, r) for i, r in enumerate(rows, 1) if r["state"]["depth"] == 2)
    r["state"]["path"][1]["site"] = [999]
    (out / "rows.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    problems = checker.check(out, sample=0, progress=False).problems
    assert any(w.startswith(f"rows.jsonl:{no} ") and p.startswith("state.path[1] (") and "replay" in p
               for w, p in problems), problems


def test_names_do_not_count_but_builtins_do():
    a = 'pre\nextern "C" __global__ void k(float* __restrict__ A_ptr) {\n  for (int a = 0; a < 4; ++a) {\n' \
        '    A_ptr[((int)threadIdx.x) + a] = 0;\n  }\n}\n'
    renamed = a.replace("A_ptr", "B_ptr").replace("int a = 0; a < 4; ++a", "int b = 0; b < 4; ++b") \
        .replace("+ a]", "+ b]").replace("pre", "other preamble")
    moved = a.replace("threadIdx", "blockIdx")
    assert normalise(a) == normalise(renamed) != normalise(moved)
    assert noop_on_target("cuda", a, renamed) is True and noop_on_target("cuda", a, moved) is False
    assert noop_on_target("llvm", a, a) is None


@pytest.mark.long
def test_a_step_that_changes_nothing_on_cuda_is_dropped_unless_kept(sources, tmp_path):
    args = [str(sources / "matmul.leir"), "--target", "cuda", "--strategies", "loop_parallelization,loop_reorder",
            "--seed", "1", "--test-fraction", "0", "--no-plots"]
    assert driver.main([*args, "-o", str(tmp_path / "drop")]) == 0
    assert driver.main([*args, "-o", str(tmp_path / "keep"), "--keep-noop"]) == 0
    dropped, kept = lines(tmp_path / "drop", "rows.jsonl"), lines(tmp_path / "keep", "rows.jsonl")
    noops = [r for r in kept if r["noop_on_target"]]
    assert noops and all(r["step"]["strategy"] == "loop_parallelization" for r in noops)
    assert all(r["noop_on_target"] is False for r in dropped)
    assert [r for r in kept if not r["noop_on_target"]] == dropped
    for name, n_kept in (("drop", 0), ("keep", len(noops))):
        stats = json.loads((tmp_path / name / "stats.json").read_text())["noop_on_target"]
        assert stats["per_strategy"] == {"loop_parallelization": len(noops)} and stats["kept"] == n_kept
        assert checker.check(tmp_path / name, sample=0, progress=False).problems == []
