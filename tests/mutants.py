"""Hostile mutants of real LEIR program files, and the property every reader must keep.

A mutant is a file name and its bytes, derived from a real program (the corpus and
``examples/``) written as a ``.leir`` file (canonical or the paper's display form), a ``.json``
record or list, or ``.jsonl`` lines, then edited one to three times: byte and character flips,
insertions, deletions, truncation, duplicated or swapped fragments, deep nesting of every kind
(parentheses, operator chains, ``**`` chains, unary minus, nested calls, nested index reads,
nested loop nests, JSON arrays and objects), Unicode digits, huge integers, bad program and
tensor names, odd file names and wrongly typed JSON values.

The property (``outcome``): every reader (``load_programs`` on the file, ``parse_program`` on
its text, the ``python -m engine.check`` CLI) either returns programs that round-trip (the
canonical text parses back to the same program, and so do ``to_leir_file()`` and
``to_json()``), or raises one ``LeirError`` located ``file:line:col: error: ...`` on one line
(exit code 2 for the CLI). Anything else is an escape.

As a script it counts escapes (``python tests/mutants.py --count 3000 [--seed 0]``), which
also runs against an older checkout (``PYTHONPATH=/old/tree python tests/mutants.py``).
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"
EXAMPLES = ROOT / "examples"

FORMATS = ("leir", "display", "json", "json-list", "jsonl")
# nesting depths tried: small, around the limit (MAX_DEPTH, when the tree has one), and far above it
_DEPTHS = (2, 8, 40, 90, "limit-2", "limit-1", "limit", "limit+1", 150, 400, 999, 1001, 1500)
_HUGE_DEPTHS = (3000, 6000, 20000)  # seconds of parsing each: with huge=True, one deep edit in 50
_UNICODE_DIGITS = ("²", "³", "¹", "٣", "۷", "१", "৪", "๓", "𝟘", "３", "⁵", "₂", "①", "߂", "᠕")
_HUGE = ("9" * 5000, "1" + "0" * 4400, "0" * 4999 + "7", str(2**31 - 1), str(2**31), str(2**63 - 1), str(2**63),
         str(2**64 + 1), "9" * 25, "00000000000000000008", "123456789012345678901234567890")
_BAD_NAMES = ("a b", "a\nb", "", " ", "x#y", "ünïcödé", "-rf", ".hidden", "a" * 300, "name\tx", "a/b", "a\u2028b",
              "a\rb", "x[1]", "B^{1}", "ok_name", "v2.1-final", "Ω", "２", "a\x00b", "a\x0cb", "\\", "é" * 3)
_BAD_STEMS = ("my prog", "ünïcödé", "-dash", ".dot", "a" * 150, "x#y", "２", "name.with.dots", "semi;colon",
              "[brackets]", "tab\tname", "ok")
_BAD_JSON_VALUES = ("true", "1.5", "-3", "1e400", "null", '"16"', "[]", "[[]]", "0", "18446744073709551617",
                    "{}", '"A"', "-0", "1" * 5000)
_PALETTE = ("^{", "_{", "}", "{", "[", "]", ";", "=", "(", ")", ",", "+", "-", "*", "**", "/", "//", "%", "<", "&",
            "|", "\\times", "#", "\n", "\t", " ", "\x0c", "\x0b", "\u00a0", "\u2028", "\r", "A", "tx", "a", "0", "9",
            "1.5e-3", "inf", "exp(", "max(", "if_then_else(", "B^{4}_{tx=0}", "L^{2}_{a=0}", "f32", "i64", "g", "s",
            '"', "\\", "\\n", '\\"', "\\u00e9", "ß", "²", "٣", "\ufeff", "\x7f", "\x01")
_REF = re.compile(r"[A-Z][a-z]*(?:\^\{[a-z0-9]+,[gsl]\}(?:_\{[^{}\[\]]*\})?|_\{[^{}\[\]]*\}\^\{[a-z0-9]+,[gsl]\})")
_UNARY_FUNCS = ("exp", "log", "sqrt", "abs", "erf")


@dataclass(frozen=True)
class Mutant:
    name: str        # file name (stem and suffix)
    data: bytes
    ops: tuple       # the edits applied, for messages

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix

    def text(self) -> str | None:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


# --------------------------------------------------------------------------- seeds


@functools.lru_cache(maxsize=None)
def seed_programs() -> tuple:
    """The real programs mutants start from: the corpus (when present) and every example."""
    from engine.leir.files import load_programs
    progs = list(load_programs(CORPUS)) if CORPUS.exists() else []
    progs += [p for f in sorted(EXAMPLES.glob("*.leir")) for p in load_programs(f)]
    return tuple(progs)


def seed_text(fmt: str, progs: list) -> tuple[str, str]:
    """(suffix, text) of ``progs`` written in format ``fmt``."""
    from engine.leir.printer import body_to_display
    p = progs[0]
    if fmt == "leir":
        return ".leir", p.to_leir_file()
    if fmt == "display":
        header = p.to_leir_file().split("\n\n", 1)[0]
        return ".leir", header + "\n\n" + body_to_display(p.body)
    if fmt == "json":
        return ".json", json.dumps(p.to_json(), indent=2)
    if fmt == "json-list":
        return ".json", json.dumps([q.to_json() for q in progs])
    return ".jsonl", "\n".join(json.dumps(q.to_json()) for q in progs) + "\n"


# --------------------------------------------------------------------------- edits


def _depth(rng: random.Random) -> int:
    try:
        from engine.leir.limits import MAX_DEPTH
    except ImportError:  # a tree from before the limits: aim at 100
        MAX_DEPTH = 100
    d = rng.choice(_HUGE_DEPTHS if rng.huge and rng.random() < 0.02 else _DEPTHS)
    if isinstance(d, str):
        d = MAX_DEPTH + (int(d[5:]) if len(d) > 5 else 0)
    return max(1, d)


def _pos(rng, text) -> int:
    return rng.randrange(len(text) + 1)


def _ref_site(rng, text):
    """A tensor reference in the text, preferably on a right-hand side."""
    ms = list(_REF.finditer(text))
    if not ms:
        return None
    rhs = [m for m in ms if text[:m.start()].rstrip()[-1:] not in ("[", ";", "")]
    return rng.choice(rhs if rhs and rng.random() < 0.85 else ms)


def _wrap_ref(rng, text, wrap) -> str:
    m = _ref_site(rng, text)
    if m is None:
        return flip(rng, text)
    return text[:m.start()] + wrap(m.group(0)) + text[m.end():]


def flip(rng, text):
    i = rng.randrange(max(1, len(text)))
    return text[:i] + rng.choice(_PALETTE) + text[i + 1:]


def insert(rng, text):
    i = _pos(rng, text)
    return text[:i] + "".join(rng.choice(_PALETTE) for _ in range(rng.randint(1, 4))) + text[i:]


def delete(rng, text):
    i = _pos(rng, text)
    return text[:i] + text[i + rng.randint(1, 40):]


def truncate(rng, text):
    return text[:_pos(rng, text)]


def duplicate(rng, text):
    i = _pos(rng, text)
    frag = text[i:i + rng.randint(1, 300)]
    j = _pos(rng, text)
    return text[:j] + frag * rng.choice((1, 1, 2, 5)) + text[j:]


def swap(rng, text):
    a, b = sorted(_pos(rng, text) for _ in range(2))
    n = rng.randint(1, 60)
    x, y = text[a:a + n], text[b:b + n]
    if a + n > b:
        return text
    return text[:a] + y + text[a + n:b] + x + text[b + n:]


def deep_parens(rng, text):
    n = _depth(rng)
    return _wrap_ref(rng, text, lambda r: "(" * n + r + ")" * n)


def deep_neg(rng, text):
    n = _depth(rng)
    return _wrap_ref(rng, text, lambda r: rng.choice(("-" * n + r, "-(" * n + r + ")" * n)))


def deep_calls(rng, text):
    n, f = _depth(rng), rng.choice(_UNARY_FUNCS)
    return _wrap_ref(rng, text, lambda r: rng.choice((f"{f}(" * n + r + ")" * n,
                                                      "max(" * n + r + ",1)" * n,
                                                      "if_then_else(1<2," * n + r + ",0)" * n)))


def deep_chain(rng, text):
    n, op = _depth(rng), rng.choice(("+", "-", "*", "/", "+", "&", "|"))
    return _wrap_ref(rng, text, lambda r: "(" + op.join([r] * n) + ")")


def deep_pow(rng, text):
    n = _depth(rng)
    return _wrap_ref(rng, text, lambda r: rng.choice((r + "**1" * n, "(" + "**".join([r] * n) + ")")))


def wide_compare(rng, text):
    n = _depth(rng)
    return _wrap_ref(rng, text, lambda r: "if_then_else(" + "<".join(["1"] * (n + 1)) + f",{r},0)")


def deep_index(rng, text):
    """Deep nesting inside a subscript: chains, parentheses, calls or nested tensor reads."""
    n = _depth(rng)
    ms = [m for m in re.finditer(r"_\{([a-z]+)", text)]
    if not ms:
        return flip(rng, text)
    m = rng.choice(ms)
    v = m.group(1)
    new = rng.choice((v + "+0" * n, "(" * n + v + ")" * n, "max(" * n + v + ",0)" * n,
                      "K^{i64,g}_{" * n + v + "}" * n, "0+" * n + v, "-(" * n + v + ")" * n))
    return text[:m.start(1)] + new + text[m.end(1):]


def _letters(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return s


def deep_nests(rng, text):
    """Wrap a statement's body in n nested one-iteration loop nests (each a fresh variable)."""
    n = _depth(rng)
    starts = [m.end() for m in re.finditer(r"\}\s*\[", text)]
    if not starts:
        return flip(rng, text)
    i = rng.choice(starts)
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"[": 1, "]": -1}.get(text[j], 0)
        j += 1
    if depth:
        return flip(rng, text)
    j -= 1  # the matching ']'
    opening = "".join(f"L^{{1}}_{{zq{_letters(k)}=0}}[" for k in range(n))
    return text[:i] + opening + text[i:j] + "];" * n + text[j:]


def deep_json(rng, text):
    n = _depth(rng)
    kind = rng.randrange(4)
    if kind == 0:
        return "[" * n + text + "]" * n
    if kind == 1:
        return re.sub(r'"shape":\s*\[', lambda m: m.group(0) + "[" * n, text, count=1).replace(
            "]", "]" + "]" * n, 1) if '"shape"' in text else "[" * n + text + "]" * n
    i = text.find("{")
    if i < 0:
        return "[" * n + text + "]" * n
    if kind == 2:
        return text[:i + 1] + '"x": ' + "[" * n + "]" * n + ", " + text[i + 1:]
    return text[:i + 1] + '"x": ' + '{"y": ' * n + "1" + "}" * n + ", " + text[i + 1:]


def unicode_digit(rng, text):
    ms = list(re.finditer(r"[0-9]", text))
    if not ms:
        return insert(rng, text)
    out = text
    for m in sorted(rng.sample(ms, min(len(ms), rng.choice((1, 1, 3)))), key=lambda m: -m.start()):
        out = out[:m.start()] + rng.choice(_UNICODE_DIGITS) + out[m.end():]
    return out


def huge_int(rng, text):
    ms = list(re.finditer(r"[0-9]+", text))
    if not ms:
        return insert(rng, text)
    m = rng.choice(ms)
    return text[:m.start()] + rng.choice(_HUGE) + text[m.end():]


def bad_name(rng, text):
    bad = rng.choice(_BAD_NAMES)
    if '"name"' in text:
        ms = list(re.finditer(r'"name":\s*"[^"]*"', text))
        m = ms[0] if rng.random() < 0.6 else rng.choice(ms)
        return text[:m.start()] + '"name": ' + json.dumps(bad, ensure_ascii=rng.random() < 0.5) + text[m.end():]
    m = re.search(r"^program .*$", text, re.M)
    if m and rng.random() < 0.6:
        return text[:m.start()] + "program " + bad + text[m.end():]
    ms = list(re.finditer(r"^(?:input|output) +([A-Za-z]+)", text, re.M))
    if not ms:
        return flip(rng, text)
    m = rng.choice(ms)
    return text[:m.start(1)] + bad + text[m.end(1):]


def drop_program_line(rng, text):
    return re.sub(r"^program .*\n", "", text, count=1, flags=re.M)


def json_value(rng, text):
    """A JSON value (shape entry, name, list) replaced by one of the wrong type or range."""
    ms = list(re.finditer(r'(?<=[\[,:])\s*(?:"[^"]*"|\d+|\[[^\[\]]*\])', text))
    if not ms:
        return flip(rng, text)
    m = rng.choice(ms)
    return text[:m.start()] + rng.choice(_BAD_JSON_VALUES) + text[m.end():]


TEXT_OPS = {f.__name__: f for f in (
    flip, insert, delete, truncate, duplicate, swap, deep_parens, deep_neg, deep_calls, deep_chain, deep_pow,
    wide_compare, deep_index, deep_nests, deep_json, unicode_digit, huge_int, bad_name, drop_program_line,
    json_value)}
OPS = tuple(TEXT_OPS) + ("byte_flip", "bad_stem")


class _Rng(random.Random):
    huge = False


def make_mutant(prog_indices: list[int], fmt: str, ops: list[str], seed: int, huge: bool = False) -> Mutant:
    """The mutant of the seed programs ``prog_indices`` in ``fmt`` after ``ops`` (deterministic);
    ``huge``: nest up to 20,000 levels deep, not 1,500."""
    rng = _Rng(seed)
    rng.huge = huge
    seeds = seed_programs()
    progs = [seeds[i % len(seeds)] for i in prog_indices]
    suffix, text = seed_text(fmt, progs if fmt in ("json-list", "jsonl") else progs[:1])
    stem = "m"
    for op in ops:
        if op in TEXT_OPS:
            text = TEXT_OPS[op](rng, text)
        elif op == "bad_stem":
            stem = rng.choice(_BAD_STEMS)
    data = text.encode("utf-8", "surrogatepass")
    if "byte_flip" in ops:
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        data = bytes(b)
    return Mutant(stem + suffix, data, tuple(ops))


def random_mutant(rng: random.Random, huge: bool = False) -> Mutant:
    n = len(seed_programs())
    k = rng.choice((1, 1, 2, 3))
    ops = [rng.choice(OPS) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    return make_mutant([rng.randrange(n) for _ in range(k)], rng.choice(FORMATS), ops, rng.randrange(2**32), huge)


# --------------------------------------------------------------------------- the property


class Escape(AssertionError):
    """A reader answered a mutant with something other than programs that round-trip or one
    located user error."""


def _located(err, path: str) -> str:
    """The error's first line, after checking it is ``path:line:col: error: <one line>``."""
    text = err.format()
    first = text.splitlines()[0] if text else ""
    if err.line is None or err.col is None or err.file != path:
        raise Escape(f"unlocated error (file={err.file!r}, line={err.line}, col={err.col}): {first}")
    if not re.match(re.escape(path) + r":\d+:\d+: error: \S", first):
        raise Escape(f"error not formatted as file:line:col: error: {text[:300]!r}")
    if "\n" in err.message or "\r" in err.message:
        raise Escape(f"error message spans several lines: {err.message[:300]!r}")
    return first


def round_trips(p) -> None:
    """Canonical text, ``to_leir_file()`` and ``to_json()`` each read back to ``p``."""
    from engine.leir.files import parse_program
    text = p.to_leir()
    q = parse_program(text, "<canonical>", name=p.name, inputs=p.inputs, outputs=p.outputs)
    if q != p or q.to_leir() != text:
        raise Escape(f"canonical text does not read back to the same program: {text[:200]}")
    if parse_program(p.to_leir_file(), "x.leir") != p:
        raise Escape(f"to_leir_file() does not read back: {p.to_leir_file()[:300]!r}")
    for fname, rec in (("x.json", json.dumps(p.to_json())), ("x.jsonl", json.dumps(p.to_json()) + "\n")):
        if parse_program(rec, fname) != p:
            raise Escape(f"to_json() does not read back through {fname}: {rec[:300]!r}")


def _guard(what: str, fn):
    from engine.leir.diagnostics import LeirError
    try:
        return fn(), None
    except (LeirError, Escape) as e:
        if isinstance(e, Escape):
            raise
        return None, e
    except BaseException as e:  # noqa: BLE001 - anything else is exactly what we look for
        if isinstance(e, KeyboardInterrupt):
            raise
        raise Escape(f"{what} raised {type(e).__name__}: {str(e)[:200]}") from e


def outcome(m: Mutant, directory: Path, cli: bool = True) -> str:
    """'valid' or 'error' when every reader keeps the property; raises ``Escape`` otherwise."""
    from engine import check
    from engine.leir.cli import run_cli
    from engine.leir.files import load_programs, parse_program
    path = directory / m.name
    path.write_bytes(m.data)
    spath = str(path)
    progs, err = _guard("load_programs", lambda: load_programs(path))
    if err is not None:
        first = _located(err, spath)
    else:
        for p in progs:
            _guard("round trip", lambda p=p: round_trips(p))
    text = m.text()
    if text is not None and text.strip():
        progs2, err2 = _guard("parse_program", lambda: parse_program(text, spath, many=True))
        if (err2 is None) != (err is None) or (err2 is not None and _located(err2, spath) != first) \
                or (progs2 is not None and progs2 != progs):
            raise Escape(f"parse_program and load_programs disagree: {err2 or 'valid'} vs {err or 'valid'}")
    if cli:
        out, errs = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errs):
            rc, _ = _guard("python -m engine.check", lambda: run_cli(check.main, [spath]))
        stderr = errs.getvalue()
        if "Traceback" in stderr:
            raise Escape(f"the CLI printed a traceback: {stderr[-500:]}")
        if err is None:
            want = "".join(p.to_leir() + "\n" for p in progs)
            if rc != 0 or out.getvalue() != want:
                raise Escape(f"the CLI gave exit {rc} on a valid file: {stderr[:300]}")
        elif rc != 2 or out.getvalue() or stderr.splitlines()[0] != first:
            raise Escape(f"the CLI gave exit {rc} and {stderr[:300]!r}, expected exit 2 and {first!r}")
    return "valid" if err is None else "error"


# --------------------------------------------------------------------------- script


def main(argv=None) -> int:
    import argparse
    import collections
    import tempfile
    import time
    ap = argparse.ArgumentParser(description="count readers' escapes over random mutants")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=3, help="escapes to print per kind")
    ap.add_argument("--huge", action="store_true", help="nest up to 20,000 levels deep")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(1000)
    rng = random.Random(args.seed)
    counts, kinds, shown = collections.Counter(), collections.Counter(), collections.Counter()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.count):
            m = random_mutant(rng, args.huge)
            try:
                counts[outcome(m, Path(d))] += 1
            except Escape as e:
                counts["escape"] += 1
                cause = e.__cause__
                kind = type(cause).__name__ if cause is not None else str(e).split(":")[0]
                kinds[kind] += 1
                if shown[kind] < args.show:
                    shown[kind] += 1
                    print(f"[{kind}] ops={m.ops} file={m.name}: {str(e)[:240]}")
    print(f"{args.count} mutants in {time.perf_counter() - t0:.1f} s: {dict(counts)}; escapes by kind: "
          f"{dict(kinds)}")
    return 0


if __name__ == "__main__":
    sys.path.append(str(ROOT))  # after PYTHONPATH, so an older tree can be measured
    sys.exit(main())
