"""Program files: ``.leir`` (a small header, then the body) and ``.json`` / ``.jsonl`` records.

A ``.leir`` file::

    # comments start with '#'
    program matmul                # optional; defaults to the file name
    input  A f32[512, 1024]
    input  C f32[1024, 768]
    output D f32[512, 768]        # f32[] is a scalar

    B^{512}_{tx=0}L^{768}_{a=0}L^{1024}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];

The body starts at the first line that is not blank, a comment or a header line, and may
use either superscript order, spaces and line breaks. A JSON record is the corpus format:
``{"name", "inputs": [{"name", "dtype", "shape"}], "outputs": [...], "leir"}``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from engine.leir.ast import DTYPES, Pos, TensorDecl
from engine.leir.diagnostics import LeirError
from engine.leir.parser import parse_body
from engine.leir.program import Program, make_program

_HEADER = re.compile(r"^(?P<kw>[a-z]+)\b(?P<rest>.*)$")
_DECL = re.compile(r"^\s+(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*:?\s*(?P<dtype>[a-z][a-z0-9]*)\s*"
                   r"\[(?P<shape>[^\]]*)\]\s*$")
_NAME = re.compile(r"^\s+(?P<name>[A-Za-z0-9_.\-]+)\s*$")


def _strip_comment(line: str) -> str:
    i = line.find("#")
    return line if i < 0 else line[:i]


def _parse_shape(text: str, line: int, col: int) -> tuple[int, ...]:
    text = text.strip()
    if not text:
        return ()
    dims = []
    for part in text.split(","):
        p = part.strip()
        if not p.isdigit() or int(p) < 1:
            raise LeirError(f"shape entries must be positive integers, got '{p}'", line, col)
        dims.append(int(p))
    return tuple(dims)


def _decl(kw: str, rest: str, lineno: int, line: str) -> TensorDecl:
    m = _DECL.match(rest)
    col = len(kw) + 2
    if not m:
        raise LeirError(f"expected '{kw} NAME DTYPE[d0, d1, ...]' (e.g. '{kw} A f32[16, 128]')", lineno, col)
    name, dtype = m["name"], m["dtype"]
    ncol = line.index(name, len(kw)) + 1
    if not re.fullmatch(r"[A-Z][a-z]*", name):
        raise LeirError(f"tensor name '{name}' must be one capital letter followed by lowercase letters",
                        lineno, ncol)
    if name[0] in "LPVBUT":
        raise LeirError(f"tensor name '{name}' starts with a reserved letter (L, P, V, B, U, T)", lineno, ncol)
    if dtype not in DTYPES:
        raise LeirError(f"unknown dtype code '{dtype}' (expected one of {', '.join(DTYPES)})",
                        lineno, line.index(dtype, ncol - 1 + len(name)) + 1)
    shape = _parse_shape(m["shape"], lineno, line.index("[") + 2)
    return TensorDecl(name, dtype, shape, pos=Pos(lineno, ncol))


def parse_leir_file(text: str, filename: str = "<input>") -> Program:
    """Parse a ``.leir`` program file; errors are ``LeirError`` located in ``filename``."""
    try:
        return _parse_leir_file(text, filename)
    except LeirError as e:
        raise e.located(filename, text) from None


def _parse_leir_file(text: str, filename: str) -> Program:
    name = Path(filename).stem if filename != "<input>" else "program"
    inputs, outputs = [], []
    lines = text.split("\n")
    body_start = None
    for i, raw in enumerate(lines, start=1):
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        m = _HEADER.match(line)
        if not m:
            body_start = i
            break
        kw, rest = m["kw"], m["rest"]
        if kw == "program":
            nm = _NAME.match(rest)
            if not nm:
                raise LeirError("expected 'program NAME'", i, len(kw) + 2)
            name = nm["name"]
        elif kw in ("input", "output"):
            d = _decl(kw, rest, i, line)
            (inputs if kw == "input" else outputs).append(d)
        else:
            raise LeirError(f"unknown header line '{kw}': expected 'program', 'input' or 'output' before "
                            "the program body", i, 1)
    if body_start is None:
        raise LeirError("no program body: expected loop nests like 'B^{N}_{tx=0}[...];' after the header",
                        max(1, len(lines)), 1)
    if not outputs:
        raise LeirError("no output declared: add a header line 'output NAME DTYPE[shape]'", 1, 1)
    # blank the header so positions in the body are positions in the file
    body_text = "\n" * (body_start - 1) + "\n".join(lines[body_start - 1:])
    body = parse_body(body_text)
    prog = make_program(name, inputs, outputs, body)
    for w in prog.info.warnings:
        w.located(filename, text)
    return prog


# --------------------------------------------------------------------------- JSON


def _json_decls(rec: dict, key: str, line: int) -> list[TensorDecl]:
    items = rec.get(key)
    if not isinstance(items, list):
        raise LeirError(f"'{key}' must be a list of {{\"name\", \"dtype\", \"shape\"}} objects", line, 1)
    out = []
    for it in items:
        if not (isinstance(it, dict) and isinstance(it.get("name"), str) and isinstance(it.get("dtype"), str)
                and isinstance(it.get("shape"), list)):
            raise LeirError(f"each entry of '{key}' needs a string 'name', a string 'dtype' and a list "
                            f"'shape', got {json.dumps(it)[:80]}", line, 1)
        if it["dtype"] not in DTYPES:
            raise LeirError(f"unknown dtype code '{it['dtype']}' for '{it['name']}' "
                            f"(expected one of {', '.join(DTYPES)})", line, 1)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in it["shape"]):
            raise LeirError(f"shape of '{it['name']}' must be positive integers, got {it['shape']}", line, 1)
        if not re.fullmatch(r"[A-Z][a-z]*", it["name"]) or it["name"][0] in "LPVBUT":
            raise LeirError(f"'{it['name']}' is not a valid LEIR tensor name", line, 1)
        out.append(TensorDecl(it["name"], it["dtype"], tuple(it["shape"]), pos=Pos(line, 1)))
    return out


def program_from_json(rec, line: int = 1, col_of_leir: int = 0) -> Program:
    """A ``Program`` from a JSON record (positions in its LEIR text are shifted by ``col_of_leir``)."""
    if not isinstance(rec, dict):
        raise LeirError("a program record must be a JSON object", line, 1)
    missing = [k for k in ("name", "inputs", "outputs", "leir") if k not in rec]
    if missing:
        raise LeirError(f"program record is missing {', '.join(repr(k) for k in missing)}", line, 1)
    if not isinstance(rec["name"], str) or not isinstance(rec["leir"], str):
        raise LeirError("'name' and 'leir' must be strings", line, 1)
    inputs = _json_decls(rec, "inputs", line)
    outputs = _json_decls(rec, "outputs", line)
    if not outputs:
        raise LeirError("'outputs' is empty: a program writes at least one known tensor", line, 1)
    try:
        body = parse_body(rec["leir"])
        prog = make_program(rec["name"], inputs, outputs, body)
    except LeirError as e:
        raise _shift(e, line, col_of_leir)
    for w in prog.info.warnings:
        _shift(w, line, col_of_leir)
    return prog


def _shift(e: LeirError, line: int, col: int) -> LeirError:
    """Move a position inside an embedded LEIR string to its place in the JSON file."""
    if e.line is not None:
        if e.line == 1:
            e.col = (e.col or 1) + col
        e.line += line - 1
    else:
        e.line, e.col = line, 1
    return e


def _leir_col(line_text: str) -> int:
    """Column offset of the LEIR string's first character in a JSON line (0 if not found)."""
    m = re.search(r'"leir"\s*:\s*"', line_text)
    return m.end() if m else 0


def parse_json_text(text: str, filename: str = "<input>") -> list[Program]:
    """Programs from ``.json`` (an object or a list) or ``.jsonl`` (one object per line) text."""
    try:
        return _parse_json_text(text, filename)
    except LeirError as e:
        raise e.located(filename, text) from None


def _parse_json_text(text: str, filename: str) -> list[Program]:
    progs = _parse_json_records(text, filename)
    for p in progs:
        for w in p.info.warnings:
            w.located(filename, text)
    return progs


def _parse_json_records(text: str, filename: str) -> list[Program]:
    if filename.endswith(".jsonl"):
        progs = []
        for i, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as ex:
                raise LeirError(f"invalid JSON: {ex.msg}", i, ex.colno) from None
            progs.append(program_from_json(rec, i, _leir_col(line)))
        if not progs:
            raise LeirError("empty program file: no JSON records", 1, 1)
        return progs
    try:
        data = json.loads(text)
    except json.JSONDecodeError as ex:
        raise LeirError(f"invalid JSON: {ex.msg}", ex.lineno, ex.colno) from None
    recs = data if isinstance(data, list) else [data]
    lines = text.split("\n")
    out = []
    for rec in recs:
        # locate the record's "leir" line for positions (best effort: n-th occurrence)
        line = 1
        col = 0
        idx = len(out)
        hits = [j for j, l in enumerate(lines, start=1) if re.search(r'"leir"\s*:', l)]
        if idx < len(hits):
            line = hits[idx]
            col = _leir_col(lines[line - 1])
        out.append(program_from_json(rec, line, col))
    if not out:
        raise LeirError("empty program file: no JSON records", 1, 1)
    return out


def read_text(path: str | Path) -> str:
    """File contents as text, or a ``LeirError`` for unreadable, empty or binary files."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as ex:
        raise LeirError(f"cannot read file: {ex.strerror}", file=str(path)) from None
    if not data.strip():
        raise LeirError("empty program file", 1, 1, file=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as ex:
        before = data[: ex.start]
        line = before.count(b"\n") + 1
        col = ex.start - (before.rfind(b"\n") + 1) + 1
        raise LeirError("not a text file (invalid UTF-8); expected a .leir, .json or .jsonl program",
                        line, col, file=str(path)) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise LeirError("not a text file (contains NUL bytes)", line, 1, file=str(path))
    return text


PROGRAM_SUFFIXES = (".leir", ".json", ".jsonl")


def load_programs(path: str | Path) -> list[Program]:
    """Every program in a ``.leir``, ``.json`` or ``.jsonl`` file, or in every such file of a
    folder (sorted by name, not recursive). ``LeirError`` when a file is invalid."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in PROGRAM_SUFFIXES and f.is_file())
        if not files:
            raise LeirError(f"no program files ({', '.join(PROGRAM_SUFFIXES)}) in this folder", file=str(path))
        return [q for f in files for q in load_programs(f)]
    name = str(path)
    return parse_program(read_text(path), filename=name, many=True)


def parse_program(text: str, filename: str = "<input>", *, name: str | None = None, inputs=None, outputs=None,
                  many: bool = False):
    """A program from text: a ``.leir`` file (header and body), a JSON record (or, for
    ``.json`` / ``.jsonl`` names and text starting with ``{`` or ``[``, records), or, with
    ``inputs`` and ``outputs`` given (``TensorDecl`` or ``{name, dtype, shape}``), a bare body
    named ``name``. ``many``: a list of every program the text holds."""
    if inputs is not None or outputs is not None:
        decls = [_as_decl(d) for d in inputs or ()], [_as_decl(d) for d in outputs or ()]
        try:
            prog = make_program(name or "program", decls[0], decls[1], parse_body(text))
        except LeirError as e:
            raise e.located(filename, text) from None
        return [prog] if many else prog
    if filename.endswith((".json", ".jsonl")) or text.lstrip()[:1] in ("{", "["):
        progs = parse_json_text(text, filename)
    else:
        progs = [parse_leir_file(text, filename)]
    return progs if many else progs[0]


def _as_decl(d) -> TensorDecl:
    if isinstance(d, TensorDecl):
        return d
    if isinstance(d, dict):
        return _json_decls({"d": [d]}, "d", 1)[0]
    raise LeirError(f"a tensor declaration must be a TensorDecl or a {{name, dtype, shape}} object, got {d!r}")


def load_program(path: str | Path, name: str | None = None) -> Program:
    """One program from a file: the one called ``name``, or the first."""
    progs = load_programs(path)
    if name is None:
        return progs[0]
    for p in progs:
        if p.name == name:
            return p
    raise LeirError(f"no program named '{name}' in this file (it has: "
                    f"{', '.join(p.name for p in progs[:10])}{', ...' if len(progs) > 10 else ''})",
                    file=str(path))


# --------------------------------------------------------------------------- writers


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a killed job never leaves a half-written file."""
    import os
    import tempfile
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
