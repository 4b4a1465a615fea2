"""The sources of a job, resolved into task specs in a fixed order.

A source is a program file (``.leir``, ``.json``, ``.jsonl``), a KernelBench-style ``.py`` file,
a folder of them (walked recursively, sorted by path), or workloads of the library
(``--workloads NAME[,NAME...]|all`` with shape and dtype variation, seeded). Each program
becomes one task spec carrying everything needed to run it elsewhere (the program record, or
the workload's shapes and dtype, or the Python file's text). A file that cannot be read or a
record that does not parse is a note, never the end of the job: the other sources go on.
"""
from __future__ import annotations

import json
from pathlib import Path

from engine.leir.diagnostics import LeirError

PROGRAM_SUFFIXES = (".leir", ".json", ".jsonl")


def _note(source: str, err: LeirError) -> dict:
    return {"source": source, "reason": "bad source", "message": err.format().splitlines()[0]}


def program_specs(path: Path) -> tuple[list[dict], list[dict]]:
    """(specs, notes) of one program file; a ``.jsonl`` file is read record by record."""
    from engine.leir.files import parse_program, program_from_json, read_text
    name = str(path)
    try:
        text = read_text(path)
    except LeirError as e:
        return [], [_note(name, e)]
    specs, notes = [], []
    if path.suffix == ".jsonl":
        for no, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            src = f"{name}:{no}"
            try:
                rec = json.loads(line)
                prog = program_from_json(rec, no)
            except json.JSONDecodeError as ex:
                notes.append(_note(src, LeirError(f"invalid JSON: {ex.msg}", no, ex.colno, file=name)))
                continue
            except LeirError as e:
                notes.append(_note(src, e.located(name, text)))
                continue
            specs.append(_program_spec(src, prog))
        return specs, notes
    try:
        progs = parse_program(text, filename=name, many=True)
    except LeirError as e:
        return [], [_note(name, e)]
    for i, prog in enumerate(progs):
        specs.append(_program_spec(name if len(progs) == 1 else f"{name}#{i}", prog))
    return specs, notes


def _program_spec(source: str, prog) -> dict:
    return {"source": source, "kind": "program", "type": prog.name, "program": prog.to_json()}


def kernelbench_spec(path: Path, dtype: str | None) -> tuple[list[dict], list[dict]]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return [], [{"source": str(path), "reason": "bad source", "message": f"{path}: error: {e}"}]
    spec = {"source": str(path), "kind": "kernelbench", "type": path.stem, "path": str(path), "text": text,
            "dtype": dtype}
    return [spec], []


def file_specs(path: Path, dtype: str | None) -> tuple[list[dict], list[dict]]:
    if path.suffix == ".py":
        return kernelbench_spec(path, dtype)
    if path.suffix in PROGRAM_SUFFIXES:
        return program_specs(path)
    return [], [{"source": str(path), "reason": "bad source",
                 "message": f"{path}: error: not a program file (expected .leir, .json, .jsonl or .py)"}]


def path_specs(source: str, dtype: str | None) -> tuple[list[dict], list[dict]]:
    p = Path(source)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in PROGRAM_SUFFIXES + (".py",)
                       and not any(part.startswith(".") for part in f.relative_to(p).parts))
        if not files:
            return [], [{"source": source, "reason": "bad source",
                         "message": f"{source}: error: no program files (.leir, .json, .jsonl, .py) in this folder"}]
        specs, notes = [], []
        for f in files:
            s, n = file_specs(f, dtype)
            specs += s
            notes += n
        return specs, notes
    if not p.exists():
        return [], [{"source": source, "reason": "bad source", "message": f"{source}: error: no such file or folder"}]
    return file_specs(p, dtype)


def workload_specs(names: str, shapes: str, dtypes: str, variants: int, seed: int) -> list[dict]:
    """Specs of library workloads: each name x each shape variant x each dtype.

    ``shapes``: ``default`` (the workload's sizes), ``test`` (its reduced test sizes) or
    ``random`` (``variants`` seeded samples of its varied sizes). ``dtypes``: a comma list of
    f16/f32/f64, or ``random`` (one seeded draw per variant)."""
    from .workloads import DTYPES, registry, sample
    reg = registry()
    wanted = list(reg) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in reg]
    if unknown:
        raise LeirError(f"unknown workload(s) {', '.join(unknown)} (see dataset/workloads; 'all' takes every one)")
    if shapes not in ("default", "test", "random"):
        raise LeirError(f"--shapes must be default, test or random, got '{shapes}'")
    dlist = None if dtypes == "random" else [d.strip() for d in dtypes.split(",") if d.strip()]
    if dlist is not None and (not dlist or any(d not in DTYPES for d in dlist)):
        raise LeirError(f"--dtypes must be a comma list of {', '.join(DTYPES)} or 'random', got '{dtypes}'")
    specs = []
    for name in wanted:
        w = reg[name]
        for k in range(variants if shapes == "random" else 1):
            if shapes == "random":
                sh, drawn = sample(w, seed * 1000 + k)
            else:
                sh, drawn = dict(w.shapes if shapes == "default" else w.test_shapes), "f32"
            for d in ([drawn] if dlist is None else dlist):
                label = ",".join(f"{a}={b}" for a, b in sorted(sh.items()))
                specs.append({"source": f"workload:{name}[{label}]:{d}", "kind": "workload", "type": name,
                              "workload": name, "shapes": sh, "dtype": d, "seed": seed})
    return specs


def resolve_sources(sources: list[str], workloads: str | None, shapes: str, dtypes: str, variants: int,
                    seed: int, dtype: str | None = None) -> tuple[list[dict], list[dict]]:
    """(task specs with their ``index``, notes of bad sources), in command-line order."""
    specs, notes = [], []
    for s in sources:
        a, b = path_specs(s, dtype)
        specs += a
        notes += b
    if workloads:
        specs += workload_specs(workloads, shapes, dtypes, variants, seed)
    for i, sp in enumerate(specs):
        sp["index"] = i
    return specs, notes
