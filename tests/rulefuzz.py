"""A seeded fuzzer of rule files (issue 29): blocks of the shipped strategy files with mistakes
put in (dropped or extra parentheses, misspelt relations and directives, bad directive values,
wrong arities, bad chain-of-thought templates, broken strings and examples, cut files, stray
bytes), each written as a folder of one's own and checked as every command checks rules.

``mutant(seed)`` is deterministic: (file text or bytes, the mutations made, whether the built-in
rules are loaded with it). ``check(folder, builtin)`` lints it in-process and returns what went
wrong with the checking itself: an exception (a traceback a user would see), an error without
a usable location, or a folder that lints clean and still cannot make an engine. A mistake in
the file is not a failure: it must be reported, located.

``python tests/rulefuzz.py N [--start S] [--keep DIR]`` runs N seeds and prints a summary.
"""
from __future__ import annotations

import random
import re
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
RULES = HERE.parent / "rules"

_HEAD = re.compile(r"\((?P<name>[A-Za-z][A-Za-z0-9_-]*)")
_DIRECTIVE = re.compile(r"@(?P<key>[A-Za-z]+)")


def blocks() -> list[tuple[str, str]]:
    """(strategy name, block text) of every block of the shipped strategy files, in file order."""
    out = []
    for f in sorted(RULES.glob("*.egg")):          # the strategy files (the schema is rules/leir/)
        lines = f.read_text().split("\n")
        starts = [i for i, l in enumerate(lines) if re.match(r"\s*;+\s*@strategy\s", l)]
        for a, b in zip(starts, starts[1:] + [len(lines)]):
            text = "\n".join(lines[a:b]).rstrip() + "\n"
            out.append((re.search(r"@strategy\s+(\w+)", lines[a]).group(1), text))
    return out


_BLOCKS: list = []


def _code_positions(text: str, chars: str) -> list[int]:
    """Offsets of ``chars`` outside comments and strings."""
    out, in_str, in_comment = [], False, False
    for i, ch in enumerate(text):
        if in_comment:
            in_comment = ch != "\n"
        elif in_str:
            if ch == '"' and text[i - 1] != "\\":
                in_str = False
        elif ch == ";":
            in_comment = True
        elif ch == '"':
            in_str = True
        elif ch in chars:
            out.append(i)
    return out


def _misspell(rng: random.Random, word: str) -> str:
    k = rng.randrange(len(word))
    how = rng.randrange(4)
    if how == 0 and len(word) > 1:
        return word[:k] + word[k + 1:]                                   # a letter dropped
    if how == 1:
        return word[:k] + rng.choice("abcdeiloqrstxyz") + word[k:]        # a letter added
    if how == 2 and len(word) > 1:
        k = min(k, len(word) - 2)
        return word[:k] + word[k + 1] + word[k] + word[k + 2:]            # two letters swapped
    return word[:k] + word[k].swapcase() + word[k + 1:]                   # a case changed


def _code_lines(text: str) -> list[int]:
    return [i for i, l in enumerate(text.split("\n")) if l.strip() and not l.lstrip().startswith(";")]


def m_drop_paren(rng, text):
    pos = _code_positions(text, "()")
    if not pos:
        return text, None
    k = rng.choice(pos)
    return text[:k] + text[k + 1:], f"dropped {text[k]!r}"


def m_extra_paren(rng, text):
    pos = _code_positions(text, "() ")
    if not pos:
        return text, None
    k = rng.choice(pos)
    ch = rng.choice("()")
    return text[:k] + ch + text[k:], f"extra {ch!r}"


def m_misspell_relation(rng, text):
    code = [m for m in _HEAD.finditer(text) if m.start() in set(_code_positions(text, "("))
            and m.group("name") not in ("rule", "identity")]
    if not code:
        return text, None
    m = rng.choice(code)
    new = _misspell(rng, m.group("name"))
    return text[:m.start("name")] + new + text[m.end("name"):], f"relation {m.group('name')} -> {new}"


def m_misspell_directive(rng, text):
    found = [m for m in _DIRECTIVE.finditer(text)]
    if not found:
        return text, None
    m = rng.choice(found)
    new = _misspell(rng, m.group("key"))
    return text[:m.start("key")] + new + text[m.end("key"):], f"directive @{m.group('key')} -> @{new}"


BAD_VALUES = {"category": ["loops", "", "graph operator"], "difficulty": ["hard", "3"], "K": ["x", "-1", "1.5"],
              "P": ["", "two"], "S": ["999999999999999999999999", "s"], "inverse": ["not a name", "loop_splitt"],
              "exactness": ["exact", "approx"], "benefit": ["speed", "none, parallelism", "parallelism,,"],
              "origin": ["mine", "Paper"], "strategy": ["all", "2bad", "loop-split", ""],
              "description": [""], "range": [""]}


def m_bad_value(rng, text):
    found = [m for m in re.finditer(r"@(\w+)[ \t]*([^@\n]*)", text) if m.group(1) in BAD_VALUES]
    if not found:
        return text, None
    m = rng.choice(found)
    new = rng.choice(BAD_VALUES[m.group(1)])
    return text[:m.start(2)] + new + text[m.end(2):], f"@{m.group(1)} {new!r}"


def m_wrong_arity(rng, text):
    """A call inside a rule loses its last argument or gains a copy of one."""
    opens = _code_positions(text, "(")
    rng.shuffle(opens)
    for k in opens[:20]:
        depth, items, i, start = 0, [], k, None
        while i < len(text):
            ch = text[i]
            if ch == "(":
                depth += 1
                if depth == 2:
                    start = i
            elif ch == ")":
                depth -= 1
                if depth == 1 and start is not None:
                    items.append((start, i + 1))
                    start = None
                if depth == 0:
                    break
            elif depth == 1 and not ch.isspace():
                j = i
                while j < len(text) and not text[j].isspace() and text[j] not in "()":
                    j += 1
                items.append((i, j))
                i = j - 1
            i += 1
        if len(items) >= 3 and not text[items[0][0]:items[0][1]].startswith((":", "rule")):
            if rng.random() < 0.5:
                a, b = items[-1]
                return text[:a] + text[b:], "an argument dropped"
            a, b = rng.choice(items[1:])
            return text[:b] + " " + text[a:b] + text[b:], "an argument repeated"
    return text, None


def m_bad_template(rng, text):
    found = [m for m in re.finditer(r"@cot ([^\n]*)", text)]
    if not found:
        return text.replace(";; @description", ";; @cot {no_such_slot} is used\n;; @description", 1), "a @cot added"
    m = rng.choice(found)
    line = m.group(1)
    how = rng.randrange(4)
    if how == 0:
        new = line + " {nosuch}"
    elif how == 1 and "}" in line:
        k = line.index("}")
        new = line[:k] + line[k + 1:]
    elif how == 2:
        new = "{" + line
    else:
        new = line.replace("{", "{param.", 1)
    return text[:m.start(1)] + new + text[m.end(1):], "a @cot template broken"


def m_break_string(rng, text):
    pos = [i for i, ch in enumerate(text) if ch == '"']
    if not pos:
        return text, None
    k = rng.choice(pos)
    return text[:k] + text[k + 1:], "a quote dropped"


def m_delete_line(rng, text):
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    return "\n".join(lines[:k] + lines[k + 1:]), f"line {k + 1} deleted"


def m_bad_example(rng, text):
    lines = text.split("\n")
    idx = [i for i, l in enumerate(lines) if re.match(r"\s*;;\s{2,}\S", l)]
    if not idx:
        return text, None
    i = rng.choice(idx)
    l = lines[i]
    k = rng.randrange(len(l.rstrip()) - 3, len(l)) if len(l) > 4 else len(l) - 1
    lines[i] = l[:k] + rng.choice(["", "#", "^{", "]", ";", "x"]) + l[k + 1:]
    return "\n".join(lines), f"example line {i + 1} changed"


def m_ruleset_or_name(rng, text):
    how = rng.randrange(4)
    if how == 0 and ":ruleset step" in text:
        return text.replace(":ruleset step", ":ruleset stepp", 1), ":ruleset stepp"
    if how == 1 and ":name" in text:
        return re.sub(r':name "[^"]*"', "", text, count=1), ":name removed"
    if how == 2:
        return re.sub(r':name "([^"]*)"', r':name \1', text, count=1), ":name unquoted"
    return re.sub(r'"(\w+)(/[\w-]+)?" \(P', r'"other\2" (P', text, count=1), "Step row renamed"


def m_duplicate(rng, text):
    return text + "\n" + text, "block repeated"


def m_truncate(rng, text):
    k = rng.randrange(1, max(2, len(text)))
    return text[:k], f"cut at {k}"


def m_junk(rng, text):
    k = rng.randrange(len(text) + 1)
    junk = rng.choice(["\x00", "\t\t", "\u00a0", "é", "(((", ")))", "#", "\\", "\r", "(rule)", "(relation)",
                       "(rule () () :ruleset step :name \"x\")", "@", "{", "(identity)", "(leir \"A\")"])
    return text[:k] + junk + text[k:], f"{junk!r} inserted"


MUTATIONS = (m_drop_paren, m_extra_paren, m_misspell_relation, m_misspell_directive, m_bad_value, m_wrong_arity,
             m_bad_template, m_break_string, m_delete_line, m_bad_example, m_ruleset_or_name, m_duplicate,
             m_truncate, m_junk)


def mutant(seed: int) -> tuple[bytes, list[str], bool]:
    """(file bytes, mutations made, builtin rules loaded with it) of one seed."""
    if not _BLOCKS:
        _BLOCKS.extend(blocks())
    rng = random.Random(f"rulefuzz:{seed}")
    builtin = rng.random() < 0.15
    chosen = [rng.choice(_BLOCKS) for _ in range(rng.choice((1, 1, 1, 2)))]
    parts = []
    for name, text in chosen:
        if builtin:            # renamed, so that the only mistakes are the ones put in
            text = re.sub(rf"\b{name}\b", f"{name}_fz", text)
        parts.append(text)
    text = "\n".join(parts)
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        for _try in range(5):
            text2, what = rng.choice(MUTATIONS)(rng, text)
            if what is not None:
                text, done = text2, done + [what]
                break
    data = text.encode("utf-8")
    if rng.random() < 0.01:
        k = rng.randrange(len(data) + 1)
        data, done = data[:k] + b"\xff\xfe" + data[k:], done + ["bytes that are not UTF-8"]
    return data, done, builtin


def check(folder: Path, builtin: bool, engine: bool = True) -> tuple[list[str], int]:
    """(what went wrong with checking ``folder``, the errors reported): nothing went wrong when
    its mistakes, if any, were reported and located, and a clean folder made an engine."""
    from engine.leir.diagnostics import LeirError
    from engine.rewrite.lint import lint
    from engine.rewrite.rule_sources import RuleSources
    sources = RuleSources((str(folder),), builtin=builtin)
    try:
        rep = lint(sources)
    except LeirError as e:
        return [f"lint raised a LeirError instead of reporting: {e.format()}"], -1
    except Exception:
        return ["lint raised: " + traceback.format_exc(limit=6)], -1
    problems = []
    texts = {}
    for f, line, col, _kind, msg in rep.items:
        p = Path(f)
        if not p.is_file():
            problems.append(f"not located in a file: {f}:{line}:{col}: {msg}")
            continue
        if f not in texts:
            texts[f] = p.read_bytes().decode("utf-8", "replace")
        n = texts[f].count("\n") + 1
        if not (isinstance(line, int) and 1 <= line <= n and isinstance(col, int) and col >= 1) or not msg:
            problems.append(f"bad location {f}:{line}:{col} (file of {n} lines): {msg!r}")
    if rep.errors == 0 and engine:
        from engine import Engine
        try:
            Engine(rules=sources)
        except LeirError as e:
            problems.append(f"lints clean, but the engine refuses it: {e.format()[:300]}")
        except Exception:
            problems.append("lints clean, but the engine raised: " + traceback.format_exc(limit=6))
    return problems, rep.errors


def run(n: int, start: int = 0, keep: Path | None = None, log=None) -> dict:
    """Fuzz seeds start..start+n-1; {"files", "with_errors", "clean", "failures": [...]}."""
    import tempfile
    out = {"files": 0, "with_errors": 0, "clean": 0, "failures": []}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(start, start + n):
            data, what, builtin = mutant(seed)
            folder = Path(tmp) / f"s{seed}"
            folder.mkdir()
            (folder / "x.egg").write_bytes(data)
            bad, errs = check(folder, builtin)
            out["files"] += 1
            out["with_errors" if errs else "clean"] += 1
            if bad:
                out["failures"].append({"seed": seed, "mutations": what, "builtin": builtin, "problems": bad})
                if keep is not None:
                    keep.mkdir(parents=True, exist_ok=True)
                    (keep / f"seed{seed}.egg").write_bytes(data)
            if log and (seed - start + 1) % 100 == 0:
                log(f"{seed - start + 1} files, {len(out['failures'])} failing")
    return out


if __name__ == "__main__":
    import argparse
    import json
    sys.path.insert(0, str(HERE.parent))
    ap = argparse.ArgumentParser(prog="python tests/rulefuzz.py")
    ap.add_argument("n", type=int)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--keep", help="write failing files here")
    a = ap.parse_args()
    res = run(a.n, a.start, Path(a.keep) if a.keep else None, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps({k: v for k, v in res.items() if k != "failures"}))
    for f in res["failures"][:30]:
        print(json.dumps(f)[:2000])
