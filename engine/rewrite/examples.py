"""Worked examples in a strategy block: a small program and the neighbour the strategy gives.

An example is written in the block's leading comment, after the metadata and prose and just
before the block's first form::

    ;; @example
    ;;   input  A f32[4, 8]
    ;;   output C f32[4, 8]
    ;;   L^{4}_{a=0}L^{8}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2;];
    ;; @after loop_split loop=b factor=2
    ;;   L^{4}_{a=0}L^{4}_{c=0}L^{2}_{b=0}[C^{f32,g}_{a,c*2+b}=A^{f32,g}_{a,c*2+b}*2;];

``@example [LABEL]`` opens a BEFORE program: a complete ``.leir`` program (``input`` /
``output`` header lines, then the body). Each ``@after [RULE] [KEY=VALUE ...]`` that follows
gives one neighbour AFTER: its body (the BEFORE's tensors) or a complete program. RULE (a rule
of the block) and KEY=VALUE (step parameters, compared with their text) pin which step is
meant when several give programs of the same shape. A text runs over the ``;;`` lines below
its directive up to the next ``@`` directive or the first line that is not a comment; one
top-level statement per line, in canonical LEIR (as the engine prints it). Names of
intermediates and loop variables that the rule creates may differ from the engine's: AFTER is
compared modulo renaming (``engine.leir.canonical.renaming_key``). Keep the programs tiny (a
few hundred points): each example is built and run on llvm by the tests.

Every ``(example, after)`` pair is one case: ``python -m lowering.rule_examples`` and
tests/test_rule_examples.py enumerate BEFORE with the block's strategy, find AFTER among the
neighbours, replay it with ``Engine.apply`` and verify it on llvm (example_check.py). This
module only reads the text (no TVM); positions of errors are the rule file's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.leir.diagnostics import LeirError

EXAMPLE, AFTER = "example", "after"
KEYS = (EXAMPLE, AFTER)
_DIRECTIVE_LINE = re.compile(r"^(\s*;+\s*)@(\w+)\b\s*(.*?)\s*$")
_COMMENT_LINE = re.compile(r"^(\s*;+)(.*)$")
_HEADER_LINE = re.compile(r"^(input|output|program)\s")
_PARAM = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$")


@dataclass(frozen=True)
class Snippet:
    """LEIR text taken from comment lines: each (file line, column of its first character, text)."""

    lines: tuple[tuple[int, int, str], ...]

    @property
    def line(self) -> int:
        return self.lines[0][0] if self.lines else 0

    def text(self) -> str:
        """The text with the file's line numbers (earlier lines blank): a parser's line is the file's."""
        out: list[str] = []
        for no, _, t in self.lines:
            out += [""] * (no - 1 - len(out))
            out.append(t)
        return "\n".join(out)

    def locate(self, e: LeirError, file: str) -> LeirError:
        """``e`` placed in the rule file: a column in the text becomes the file's column."""
        if e.line is not None:
            col0 = next((c for no, c, _ in self.lines if no == e.line), 1)
            e.col = (e.col or 1) + col0 - 1
        e.file, e.source = file, None
        return e

    def statements(self) -> list[tuple[int, int, str]]:
        """The body lines (header lines and blank ones left out)."""
        return [(no, c, t) for no, c, t in self.lines if t.strip() and not _HEADER_LINE.match(t)]

    def has_header(self) -> bool:
        return any(_HEADER_LINE.match(t) for _, _, t in self.lines)


@dataclass(frozen=True)
class Example:
    """One case: the BEFORE program of an ``@example`` and one of its ``@after`` neighbours."""

    strategy: str
    file: str
    line: int                        # the @example line
    label: str
    before: Snippet
    after: Snippet
    after_line: int                  # the @after line
    rule: str | None = None          # the rule pinned by @after, if any
    params: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """A stable test id: strategy, the @example line and the @after line."""
        return f"{self.strategy}:{self.line}:{self.after_line}" + (f":{self.label}" if self.label else "")

    def before_program(self):
        """The BEFORE program (raises ``LeirError`` located in the rule file)."""
        from engine.leir.files import parse_leir_file
        if not self.before.has_header():
            raise LeirError("an @example needs 'input' / 'output' header lines before its body",
                            self.line, 1, self.file)
        try:
            return parse_leir_file(self.before.text(), f"{self.strategy}.leir")
        except LeirError as e:
            raise self.before.locate(e, self.file) from None

    def after_program(self, before=None):
        """The AFTER program: a complete program, or a body over BEFORE's tensors."""
        from engine.leir.files import parse_leir_file
        from engine.leir.parser import parse_body
        before = before if before is not None else self.before_program()
        try:
            if self.after.has_header():
                prog = parse_leir_file(self.after.text(), f"{self.strategy}.leir")
                if _decls(prog) != _decls(before):
                    raise LeirError("the @after program declares other input/output tensors than its @example",
                                    self.after_line, 1)
                return prog
            return before.with_body(parse_body(self.after.text()))
        except LeirError as e:
            raise self.after.locate(e, self.file) from None

    def check_text(self) -> list[LeirError]:
        """Located errors of the texts without TVM: both parse, and both bodies are canonical."""
        problems: list[LeirError] = []
        try:
            before = self.before_program()
        except LeirError as e:
            return [e]
        problems += _canonical(self.before, before, self.file)
        try:
            after = self.after_program(before)
        except LeirError as e:
            return problems + [e]
        return problems + _canonical(self.after, after, self.file)


def _decls(p) -> tuple:
    return tuple((d.name, d.dtype, tuple(d.shape)) for d in p.inputs), \
        tuple((d.name, d.dtype, tuple(d.shape)) for d in p.outputs)


def _canonical(snip: Snippet, prog, file: str) -> list[LeirError]:
    """An error at the first character where the snippet's body differs from the canonical text
    (one top-level statement per line, as the engine prints it)."""
    from engine.leir.printer import item_to_str
    want = [item_to_str(n) for n in prog.body]
    got = snip.statements()
    for i, w in enumerate(want):
        if i >= len(got):
            no = got[-1][0] if got else snip.line
            return [LeirError(f"not canonical LEIR: write one top-level statement per line ({len(want)} lines)",
                              no, 1, file)]
        no, col, text = got[i]
        if text != w:
            k = next((j for j, (a, b) in enumerate(zip(text, w)) if a != b), min(len(text), len(w)))
            return [LeirError(f"not canonical LEIR: expected {w[k:k + 30]!r} here (the printer's form)",
                              no, col + k, file)]
    if len(got) > len(want):
        return [LeirError("not canonical LEIR: write one top-level statement per line", got[len(want)][0], 1, file)]
    return []


@dataclass
class _Open:
    """An @example being read: its BEFORE and the @after texts seen so far."""

    line: int
    label: str
    before: list = field(default_factory=list)
    afters: list = field(default_factory=list)     # (line, rule, params, lines)


def read_examples(text: str, file: str, blocks) -> list[tuple[int, int, str]]:
    """Attach every example of ``text`` to its strategy block (``block.examples``); the
    problems of their layout as (line, col, message). ``blocks``: the file's strategy blocks
    in file order (``rulebook.Strategy``)."""
    problems: list[tuple[int, int, str]] = []
    starts = sorted(blocks, key=lambda b: b.line)
    rule_names = {b.name: set(b.rules) for b in blocks}

    def owner(no):
        got = None
        for b in starts:
            if b.line < no:
                got = b
        return got

    cur: _Open | None = None
    target: list | None = None                     # the line list being filled

    def close():
        nonlocal cur
        if cur is None:
            return
        b = owner(cur.line)
        if not cur.afters:
            problems.append((cur.line, 1, "an @example needs at least one @after (the neighbour it gives)"))
        for aline, rule, params, lines in cur.afters:
            if not lines:
                problems.append((aline, 1, "an @after needs the neighbour's LEIR on the comment lines below it"))
                continue
            if rule is not None and rule not in rule_names.get(b.name, ()):
                problems.append((aline, 1, f"@after names rule '{rule}', which is not a rule of block '{b.name}'"))
            b.examples.append(Example(b.name, file, cur.line, cur.label, Snippet(tuple(cur.before)),
                                      Snippet(tuple(lines)), aline, rule, tuple(params)))
        cur = None

    for no, raw in enumerate(text.split("\n"), 1):
        m = _DIRECTIVE_LINE.match(raw)
        if m:
            key, value = m.group(2), m.group(3)
            target = None
            if key == EXAMPLE:
                close()
                if owner(no) is None:
                    problems.append((no, 1, "@example outside a strategy block"))
                    continue
                cur = _Open(no, value)
                target = cur.before
            elif key == AFTER:
                if cur is None:
                    problems.append((no, 1, "@after without an @example above it"))
                    continue
                rule, params, bad = _after_args(value)
                if bad:
                    problems.append((no, raw.find(bad, len(m.group(1))) + 1,
                                     f"@after takes [RULE] [KEY=VALUE ...], got {bad!r}"))
                lines: list = []
                cur.afters.append((no, rule, params, lines))
                target = lines
            else:
                close()
            continue
        c = _COMMENT_LINE.match(raw)
        if c is None or target is None:
            close()
            target = None
            continue
        body = c.group(2)
        if body.strip():
            lead = len(body) - len(body.lstrip())
            target.append((no, len(c.group(1)) + lead + 1, body.strip()))
    close()
    return problems


def _after_args(value: str) -> tuple[str | None, list, str]:
    """(rule, [(key, value)], the first malformed word or "") of an @after line."""
    rule, params = None, []
    for i, w in enumerate(value.split()):
        m = _PARAM.match(w)
        if m:
            params.append((m.group(1), m.group(2)))
        elif i == 0:
            rule = w
        else:
            return rule, params, w
    return rule, params, ""


def param_text(v) -> str:
    """A step parameter as written after ``KEY=`` (numbers and names plain, other values JSON)."""
    import json
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
