"""The sources of a job, resolved into task specs in a fixed order.

A source is a program file (``.leir``, ``.json``, ``.jsonl``), a KernelBench-style ``.py`` file,
a folder of them (walked recursively, sorted by path; JSON files whose records are not programs
are not program files), or workloads of the library
(``--workloads NAME[,NAME...]|all`` with shape and dtype variation, seeded). Each program
becomes one task spec carrying everything needed to run it elsewhere (the program record, or
the workload's shapes and dtype, or the Python file's text). A file that cannot be read or a
record that does not parse is a note, never the end of the job: the other sources go on. A
path that does not exist is an error (exit 2), and so is a job left with no program at all.

A source is named by its path relative to the command-line argument it came from, under that
argument's last component (``programs.jsonl:3``, ``examples/softmax.leir``), with the sha256 of
its file's bytes: no output says where the files were on the machine that read them, and the
same files give the same names from any working folder.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from engine.leir.diagnostics import LeirError

PROGRAM_SUFFIXES = (".leir", ".json", ".jsonl")


def _note(source: str, err: LeirError) -> dict:
    return {"source": source, "reason": "bad source", "message": err.format().splitlines()[0]}


def display_name(argument: str) -> str:
    """The name a command-line source argument goes by in the outputs: its last component."""
    p = Path(argument)
    return p.name or p.resolve().name or "."


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def job_sources(arguments: list[str]) -> list[dict]:
    """The job record of its source arguments: display name and content hash (a folder's: of
    its files' names and hashes, in the order the job reads them)."""
    out = []
    for a in arguments:
        p = Path(a)
        if p.is_dir():
            files = _folder_files(p)
            text = "".join(f"{f.relative_to(p).as_posix()}\0{file_hash(f)}\n" for f in files)
            digest = hashlib.sha256(text.encode()).hexdigest()
        else:
            digest = file_hash(p)
        out.append({"name": display_name(a), "sha256": digest})
    return out


def program_specs(path: Path, name: str | None = None) -> tuple[list[dict], list[dict]]:
    """(specs, notes) of one program file, ``name`` its name in the outputs; a ``.jsonl`` file
    is read record by record."""
    from engine.leir.files import parse_program, program_from_json, read_text
    name = name or path.name
    try:
        text = read_text(path)
    except LeirError as e:
        e.file = name
        return [], [_note(name, e)]
    digest = hashlib.sha256(text.encode()).hexdigest()
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
            specs.append(_program_spec(src, prog, digest))
        return specs, notes
    try:
        progs = parse_program(text, filename=name, many=True)
    except LeirError as e:
        return [], [_note(name, e)]
    for i, prog in enumerate(progs):
        specs.append(_program_spec(name if len(progs) == 1 else f"{name}#{i}", prog, digest))
    return specs, notes


def _program_spec(source: str, prog, digest: str) -> dict:
    return {"source": source, "sha256": digest, "kind": "program", "type": prog.name, "program": prog.to_json()}


def kernelbench_spec(path: Path, dtype: str | None, name: str | None = None) -> tuple[list[dict], list[dict]]:
    name = name or path.name
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        return [], [{"source": name, "reason": "bad source", "message": f"{name}: error: cannot read file: {why}"}]
    spec = {"source": name, "sha256": hashlib.sha256(text.encode()).hexdigest(), "kind": "kernelbench",
            "type": path.stem, "path": name, "text": text, "dtype": dtype}
    return [spec], []


def file_specs(path: Path, dtype: str | None, name: str | None = None) -> tuple[list[dict], list[dict]]:
    name = name or path.name
    if path.suffix == ".py":
        return kernelbench_spec(path, dtype, name)
    if path.suffix in PROGRAM_SUFFIXES:
        return program_specs(path, name)
    return [], [{"source": name, "reason": "bad source",
                 "message": f"{name}: error: not a program file (expected .leir, .json, .jsonl or .py)"}]


def holds_programs(path: Path) -> bool:
    """Whether a ``.json`` / ``.jsonl`` file met in a folder is a program file: its (first)
    record has a ``leir`` text. A file of other records (the corpus's
    ``reference_coverage.jsonl``, a dataset's rows) is not read as programs; one that is not
    JSON at all is (its error becomes a note)."""
    if path.suffix not in (".json", ".jsonl"):
        return True
    try:
        with open(path, encoding="utf-8") as f:
            if path.suffix == ".jsonl":
                first = next((line for line in f if line.strip()), "")
                rec = json.loads(first) if first else None
            else:
                rec = json.loads(f.read())
                rec = rec[0] if isinstance(rec, list) and rec else rec
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return True
    return not isinstance(rec, dict) or "leir" in rec


def _folder_files(p: Path) -> list[Path]:
    """The program files of a folder, recursively, by path; JSON files of other records left out."""
    return sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in PROGRAM_SUFFIXES + (".py",)
                  and not any(part.startswith(".") for part in f.relative_to(p).parts) and holds_programs(f))


def path_specs(source: str, dtype: str | None) -> tuple[list[dict], list[dict]]:
    p = Path(source)
    root = display_name(source)
    if p.is_dir():
        files = _folder_files(p)
        if not files:
            return [], [{"source": root, "reason": "bad source",
                         "message": f"{root}: error: no program files (.leir, .json, .jsonl, .py) in this folder"}]
        specs, notes = [], []
        for f in files:
            s, n = file_specs(f, dtype, f"{root}/{f.relative_to(p).as_posix()}")
            specs += s
            notes += n
        return specs, notes
    if not p.exists():
        raise LeirError("no such file or folder", file=source)
    return file_specs(p, dtype, root)


def workload_specs(names: str, shapes: str, dtypes: str, variants: int, seed: int) -> list[dict]:
    """Specs of library workloads: each name x each shape variant x each dtype.

    ``shapes``: ``default`` (the workload's sizes), ``test`` (its reduced test sizes) or
    ``random`` (``variants`` seeded samples of its varied sizes). ``dtypes``: a comma list of
    f16/f32/f64, or ``random`` (one seeded draw per variant)."""
    from ..workloads import DTYPES, registry, sample
    reg = registry()
    wanted = list(reg) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in reg]
    if unknown:
        from engine.rewrite.unknown import did_you_mean
        raise LeirError(f"--workloads: unknown workload(s) {', '.join(unknown)}{did_you_mean(unknown[0], reg)} (see "
                        "dataset/workloads; 'all' takes every one)")
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
