"""Program files: ``.leir`` (a small header, then the body) and ``.json`` / ``.jsonl`` records.

A ``.leir`` file::

    # comments start with '#'
    program matmul                # optional; defaults to the file name (made valid: limits.PROGRAM_NAME)
    input  A f32[512, 1024]
    input  C f32[1024, 768]
    output D f32[512, 768]        # f32[] is a scalar

    B^{512}_{tx=0}L^{768}_{a=0}L^{1024}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];

The body starts at the first line that is not blank, a comment or a header line, and may
use either superscript order, spaces and line breaks. A JSON record is the corpus format:
``{"name", "inputs": [{"name", "dtype", "shape"}], "outputs": [...], "leir"}``.

Every reader checks what ``engine.leir.limits`` documents (names, ASCII digits, integer
ranges, nesting depth, for JSON too) and reports anything else as a ``LeirError`` placed at
its line and column in the file, inside a JSON string included.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
from pathlib import Path

from engine.leir.ast import DTYPES, Pos, TensorDecl
from engine.leir.diagnostics import LeirError, quoted
from engine.leir.limits import (MAX_DEPTH, MAX_EXTENT, check_program_name, extent_error, program_name_from, read_int,
                                tensor_name_error)
from engine.leir.parser import parse_body
from engine.leir.program import Program, make_program

# header lines are ASCII: \s, \d and \b would take other scripts' spaces and digits
_HEADER = re.compile(r"^(?P<kw>[a-z]+)\b(?P<rest>.*)$", re.ASCII)
_DECL = re.compile(r"^\s+(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*:?\s*(?P<dtype>[a-z][a-z0-9]*)\s*"
                   r"\[(?P<shape>[^\]]*)\]\s*$", re.ASCII)
_NAME = re.compile(r"^\s+(?P<name>\S.*?)\s*$", re.ASCII)


def _strip_comment(line: str) -> str:
    i = line.find("#")
    return line if i < 0 else line[:i]


def _parse_shape(text: str, line: int, col: int) -> tuple[int, ...]:
    if not text.strip():
        return ()
    dims = []
    for part in text.split(","):
        p = part.strip()
        at = col + len(part) - len(part.lstrip())
        if not (p.isascii() and p.isdigit()) or not p.strip("0"):
            raise LeirError(f"shape entries must be positive integers, got {quoted(p)}", line, at)
        dims.append(read_int(p, "shape entry", MAX_EXTENT, line, at))
        col += len(part) + 1
    return tuple(dims)


def _decl(kw: str, rest: str, lineno: int, line: str) -> TensorDecl:
    m = _DECL.match(rest)
    col = len(kw) + 2
    if not m:
        raise LeirError(f"expected '{kw} NAME DTYPE[d0, d1, ...]' (e.g. '{kw} A f32[16, 128]')", lineno, col)
    name, dtype = m["name"], m["dtype"]
    ncol = len(kw) + m.start("name") + 1
    msg = tensor_name_error(name)
    if msg:
        raise LeirError(msg, lineno, ncol)
    if dtype not in DTYPES:
        raise LeirError(f"unknown dtype code '{dtype}' (expected one of {', '.join(DTYPES)})",
                        lineno, len(kw) + m.start("dtype") + 1)
    shape = _parse_shape(m["shape"], lineno, len(kw) + m.start("shape") + 1)
    return TensorDecl(name, dtype, shape, pos=Pos(lineno, ncol))


def parse_leir_file(text: str, filename: str = "<input>") -> Program:
    """Parse a ``.leir`` program file; errors are ``LeirError`` located in ``filename``."""
    try:
        return _parse_leir_file(text, filename)
    except LeirError as e:
        raise e.located(filename, text) from None


def _parse_leir_file(text: str, filename: str) -> Program:
    name = program_name_from(Path(filename).stem) if filename != "<input>" else "program"
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
            name = check_program_name(nm["name"], i, len(kw) + nm.start("name") + 1)
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


class _HugeInt:
    """A JSON integer too long to convert (``int`` refuses over 4,300 digits): never a valid
    shape entry, shown shortened in messages."""

    def __init__(self, digits: str):
        self.digits = digits

    def __repr__(self) -> str:
        return f"{self.digits[:10]}...{self.digits[-4:]} ({len(self.digits)} digits)"


def _json_int(digits: str):
    return int(digits) if len(digits) <= 40 else _HugeInt(digits)


# a JSON string (to its end, or the end of the text when unterminated) or a bracket
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\(?:.|\Z))*(?:"|\Z)|[\[\]{}]', re.S)  # linear: no backtracking


def loads_json(text: str, line: int = 1):
    """``json.loads`` for user files: containers nest at most ``MAX_DEPTH`` deep (the decoder
    recurses), integers too long for ``int`` become ``_HugeInt`` (never a valid number), and
    every error is a ``LeirError`` placed as if ``text`` started on ``line``."""
    depth = 0
    for m in _JSON_TOKENS.finditer(text):
        ch = m.group()[0]
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                before = text[:m.start()]
                raise LeirError(f"JSON nested more than {MAX_DEPTH} levels deep (a program record needs 4)",
                                line + before.count("\n"), m.start() - (before.rfind("\n") + 1) + 1)
        elif ch in "]}":
            depth -= 1
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as ex:
        raise LeirError(f"invalid JSON: {ex.msg}", line + ex.lineno - 1, ex.colno) from None


def _json_decls(rec: dict, key: str, line: int) -> list[TensorDecl]:
    items = rec.get(key)
    if not isinstance(items, list):
        raise LeirError(f"'{key}' must be a list of {{\"name\", \"dtype\", \"shape\"}} objects", line, 1)
    out = []
    for it in items:
        if not (isinstance(it, dict) and isinstance(it.get("name"), str) and isinstance(it.get("dtype"), str)
                and isinstance(it.get("shape"), list)):
            raise LeirError(f"each entry of '{key}' needs a string 'name', a string 'dtype' and a list "
                            f"'shape', got {quoted(json.dumps(it, default=repr), 80)}", line, 1)
        name = it["name"]
        msg = tensor_name_error(name)
        if msg:
            raise LeirError(msg, line, 1)
        if it["dtype"] not in DTYPES:
            raise LeirError(f"unknown dtype code {quoted(it['dtype'])} for '{name}' "
                            f"(expected one of {', '.join(DTYPES)})", line, 1)
        for n in it["shape"]:
            if isinstance(n, _HugeInt):
                raise LeirError(f"each dimension of '{name}' {n!r} exceeds the limit {MAX_EXTENT} (2**31-1)",
                                line, 1)
            if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
                raise LeirError(f"shape of '{name}' must be positive integers, got {quoted(it['shape'], 80)}",
                                line, 1)
            msg = extent_error(n, f"each dimension of '{name}'")
            if msg:
                raise LeirError(msg, line, 1)
        out.append(TensorDecl(name, it["dtype"], tuple(it["shape"])))
    return out


def program_from_json(rec, line: int = 1, col_of_leir: int = 0, *, locate=None) -> Program:
    """A ``Program`` from a JSON record on ``line``. Errors in its LEIR text are placed with
    ``locate`` ((line, col) in the LEIR text -> (line, col) in the file), by default as if the
    text started on ``line`` at column ``col_of_leir + 1``; other errors are placed on ``line``."""
    if not isinstance(rec, dict):
        raise LeirError("a program record must be a JSON object", line, 1)
    missing = [k for k in ("name", "inputs", "outputs", "leir") if k not in rec]
    if missing:
        raise LeirError(f"program record is missing {', '.join(repr(k) for k in missing)}", line, 1)
    if not isinstance(rec["name"], str) or not isinstance(rec["leir"], str):
        raise LeirError("'name' and 'leir' must be strings", line, 1)
    check_program_name(rec["name"], line, 1)
    inputs = _json_decls(rec, "inputs", line)
    outputs = _json_decls(rec, "outputs", line)
    if not outputs:
        raise LeirError("'outputs' is empty: a program writes at least one known tensor", line, 1)
    if locate is None:
        locate = functools.partial(_shifted, line=line, col=col_of_leir)
    try:
        body = parse_body(rec["leir"])
        prog = make_program(rec["name"], inputs, outputs, body)
    except LeirError as e:
        raise _place(e, locate, line) from e
    for w in prog.info.warnings:
        _place(w, locate, line)
    return prog


def _place(e: LeirError, locate, line: int) -> LeirError:
    """Move a position inside an embedded LEIR string to its place in the JSON file (an error
    without one, about a declaration, goes to the record's line)."""
    if e.line is None:
        e.line, e.col = line, 1
    else:
        e.line, e.col = locate(e.line, e.col or 1)
    return e


def _shifted(l: int, c: int, line: int, col: int) -> tuple[int, int]:
    return (line, c + col) if l == 1 else (line + l - 1, c)


class _JsonText:
    """A JSON text (a file, or one line of a ``.jsonl`` file), with what placing an error needs:
    its line starts and the ``"leir": "..."`` string literals it holds."""

    def __init__(self, text: str, first_line: int = 1):
        self.text, self.first_line = text, first_line
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.quotes = [m.end() - 1 for m in re.finditer(r'"leir"\s*:\s*"', text)]

    def position(self, i: int) -> tuple[int, int]:
        """(line, col) of offset ``i``."""
        k = bisect.bisect_left(self.newlines, i)
        return self.first_line + k, i - (self.newlines[k - 1] + 1 if k else 0) + 1

    def leir_string(self, value: str, prefer: int):
        """The literal holding ``value``: the ``prefer``-th ``"leir": "..."`` if it does, else the
        first that does; None when none does (placement then falls back to the record's line)."""
        decoder = json.JSONDecoder()
        for q in ([self.quotes[prefer]] if prefer < len(self.quotes) else []) + self.quotes:
            try:
                if decoder.raw_decode(self.text, q)[0] == value:
                    return _LeirString(self, q)
            except ValueError:
                continue
        return None


class _LeirString:
    """A record's ``"leir"`` string literal in its file: maps a (line, col) of the LEIR text to
    the file's, exactly (escapes such as ``\\n``, ``\\"`` or ``\\u00e9`` take several characters)."""

    def __init__(self, where: _JsonText, quote: int):
        self.where, self.quote = where, quote

    def __call__(self, line: int, col: int) -> tuple[int, int]:
        text, i = self.where.text, self.quote + 1
        for _ in range(line - 1):
            nl = self._decoded_newline(i)
            if nl is None:
                break
            i = nl
        for _ in range(col - 1):
            if i >= len(text) or text[i] == '"':
                break
            i = self._next(i)
        return self.where.position(i)

    def _next(self, i: int) -> int:
        """Offset of the character after the (possibly escaped) one at ``i``."""
        text = self.where.text
        if text[i] != "\\":
            return i + 1
        if text[i + 1:i + 2] != "u":
            return i + 2
        if 0xD800 <= int(text[i + 2:i + 6], 16) < 0xDC00 and text[i + 6:i + 8] == "\\u":
            return i + 12  # a surrogate pair decodes to one character
        return i + 6

    def _decoded_newline(self, i: int):
        """Offset just after the next decoded newline (a raw one cannot occur in JSON), or None."""
        text = self.where.text
        while i < len(text) and text[i] != '"':
            if text.startswith("\\n", i) or text.startswith("\\u000a", i) or text.startswith("\\u000A", i):
                return self._next(i)
            i = self._next(i)
        return None


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


def _record(rec, where: _JsonText, nth: int) -> Program:
    leir = rec.get("leir") if isinstance(rec, dict) else None
    literal = where.leir_string(leir, nth) if isinstance(leir, str) else None
    line = literal(1, 1)[0] if literal is not None else where.first_line
    return program_from_json(rec, line, locate=literal)


def _parse_json_records(text: str, filename: str) -> list[Program]:
    if filename.endswith(".jsonl"):
        progs = []
        for i, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            progs.append(_record(loads_json(line, i), _JsonText(line, i), 0))
        if not progs:
            raise LeirError("empty program file: no JSON records", 1, 1)
        return progs
    data = loads_json(text)
    recs = data if isinstance(data, list) else [data]
    where = _JsonText(text)
    out = [_record(rec, where, n) for n, rec in enumerate(recs)]
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
        before = data[: ex.start].decode("utf-8")  # valid up to the first bad byte
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        raise LeirError("not a text file (invalid UTF-8); expected a .leir, .json or .jsonl program",
                        line, col, file=str(path)) from None
    return text


def _check_text(text: str) -> None:
    if "\x00" in text:
        before = text[: text.index("\x00")]
        raise LeirError("not a text file (contains NUL bytes)", before.count("\n") + 1,
                        len(before) - (before.rfind("\n") + 1) + 1)


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
    try:
        _check_text(text)
    except LeirError as e:
        raise e.located(filename, text) from None
    if inputs is not None or outputs is not None:
        check_program_name("program" if name is None else name)
        decls = [_as_decl(d) for d in inputs or ()], [_as_decl(d) for d in outputs or ()]
        try:
            prog = make_program("program" if name is None else name, decls[0], decls[1], parse_body(text))
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


def json_lines(path, *, torn_tail: bool = False):
    """(line number, value) of each non-blank line of a JSON-lines file; a line that is not JSON
    is ``path:line:col: error``, except, with ``torn_tail``, the last one (a writer killed mid-line),
    which is left out (the caller counts it as torn: ``(lineno, None)`` is yielded for it)."""
    p = Path(path)
    lines = p.read_text().splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            if torn_tail and lineno == len(lines):
                yield lineno, None
                continue
            raise LeirError(f"not a JSON line: {e.msg}", lineno, e.colno, str(p)) from None


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a killed job never leaves a half-written file; its folder is made if
    missing (``-o out/run.json`` on a fresh checkout)."""
    import os
    import tempfile
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
