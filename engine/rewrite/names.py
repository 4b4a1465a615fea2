"""Fresh names for the placeholders a rule writes (``#...`` loop variables and tensors).

A rule cannot know which names a program already uses, so it writes placeholders; once a
neighbour's new statements are known they get the first names unused where they land, chosen
deterministically from the statements' structure. The choice is made on the printed text
(listing texts never rebuilds an AST) and, when the body is asked for, on the AST.
"""
from __future__ import annotations

from dataclasses import replace

from engine.leir.ast import Equation, Nest, Ref, Var, equations, refs, transform, walk

LOOP_LETTERS = "acdfghijklmnopqrsuw"
TENSOR_LETTERS = "ACDEFGHIJKMNOQRSWXYZ"
_AVOID = {"exp", "log", "sqrt", "abs", "erf", "max", "min", "inf", "if_then_else"}


def _bijective(n: int, alphabet: str) -> str:
    """n-th (0-based) word of the bijective base-len(alphabet) sequence a, c, ..., aa, ac."""
    k = len(alphabet)
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, k)
        out = alphabet[r] + out
    return out


def loop_names():
    i = 0
    while True:
        yield _bijective(i, LOOP_LETTERS)
        i += 1


def tensor_names():
    i = 0
    while True:
        w = _bijective(i, TENSOR_LETTERS)
        yield w[0] + w[1:].lower()
        i += 1


class UnknownPlaceholder(Exception):
    """A parameter names a placeholder the rule's result does not use (a rule bug)."""


def resolve_params(rule: str, params: tuple, names: dict) -> tuple:
    """``params`` ((key, value), ...) with every placeholder value (``#...``) replaced through
    ``names``.

    A placeholder the body does not use cannot be named consistently: it is an error in
    the rule that wrote it, reported rather than printed raw.
    """
    if not any(isinstance(v, str) and "#" in v for _, v in params):
        return params
    out = []
    for k, v in params:
        if isinstance(v, str) and v.startswith("#"):
            if v not in names:
                raise UnknownPlaceholder(f"{rule}: parameter {k}={v} names a placeholder the result does not use")
            v = names[v]
        elif isinstance(v, str) and "#" in v:         # an expression's text mentioning a placeholder
            try:
                v = rename_text(v, names)
            except _Uncovered:
                raise UnknownPlaceholder(f"{rule}: parameter {k}={v} names a placeholder the result does not use") \
                    from None
        out.append((k, v))
    return tuple(out)


def _nest_vars(n: Nest) -> set[str]:
    out = {l.var for l in n.loops}
    for it in n.body:
        if isinstance(it, Nest):
            out |= _nest_vars(it)
    return out


def taken_tensor_names(program, body) -> set[str]:
    """Every tensor name ``program`` declares or ``body`` reads or writes."""
    names = {d.name for d in program.known}
    for _, eq in equations(body):
        names.add(eq.lhs.name)
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            names.add(r.name)
    return names


def rename_item(item, names: dict):
    """``item`` with placeholder loop vars and tensor names replaced through ``names``."""
    def fn(x):
        if isinstance(x, Var) and x.name in names:
            return replace(x, name=names[x.name])
        if isinstance(x, Ref) and x.name in names:
            return replace(x, name=names[x.name])
        return x

    if isinstance(item, Equation):
        return replace(item, lhs=transform(item.lhs, fn), rhs=transform(item.rhs, fn))
    loops = tuple(replace(l, var=names.get(l.var, l.var)) for l in item.loops)
    return replace(item, loops=loops, body=tuple(rename_item(it, names) for it in item.body))


def _placeholders(item, loops: set, tensors: set):
    """Every placeholder loop variable and tensor name under ``item`` (a full walk)."""
    if isinstance(item, Equation):
        for e in (item.lhs, item.rhs):
            for x in walk(e):
                if isinstance(x, Var) and x.name.startswith("#"):
                    loops.add(x.name)
                elif isinstance(x, Ref) and x.name.startswith("#"):
                    tensors.add(x.name)
        return
    for l in item.loops:
        if l.var.startswith("#"):
            loops.add(l.var)
    for it in item.body:
        _placeholders(it, loops, tensors)


class _Uncovered(Exception):
    """A placeholder in the text is not among the declared ones (see ``fresh_plan``)."""


def rename_text(text: str, names: dict) -> str:
    """Canonical text with every placeholder replaced through ``names``. ``#`` occurs in
    canonical text only where a placeholder starts; the longest name matching there wins."""
    if "#" not in text:
        return text
    parts = text.split("#")
    out = [parts[0]]
    order = sorted(names, key=len, reverse=True)
    for part in parts[1:]:
        for ph in order:
            if part.startswith(ph[1:]):
                out.append(names[ph] + part[len(ph) - 1:])
                break
        else:
            raise _Uncovered("#" + part[:20])
    return "".join(out)


def fresh_plan(taken_tensors: set, stmts: tuple, texts: list[str]) -> tuple[list[dict], dict, list[str]]:
    """Fresh names for the placeholders of the new top-level statements ``stmts`` (printed as
    ``texts``): ({placeholder: name} per statement, {placeholder: name} over all of them, the
    texts with the names substituted).

    Loop placeholders get the first name unused in their statement; tensor placeholders the
    first capital-sequence name unused anywhere (``taken_tensors`` plus ``stmts``). The
    placeholders are read off the loop headers and equation LHSs (a fresh loop variable is
    bound by a loop of its statement, a fresh tensor written by one); if the text holds one
    they miss, every expression is walked instead.
    """
    if not any("#" in t for t in texts):
        return [{} for _ in stmts], {}, texts
    tensors = {eq.lhs.name for n in stmts for _, eq in _eqs(n) if eq.lhs.name.startswith("#")}
    loops = [{v for v in _nest_vars(n) if v.startswith("#")} for n in stmts]
    try:
        return _plan_names(taken_tensors, stmts, texts, tensors, loops)
    except _Uncovered:
        tensors, loops = set(), []
        for n in stmts:
            lp: set = set()
            _placeholders(n, lp, tensors)
            loops.append(lp)
        return _plan_names(taken_tensors, stmts, texts, tensors, loops)


def _plan_names(taken_tensors, stmts, texts, tensors: set, loops: list[set]):
    tensor_map: dict = {}
    if tensors:
        taken = set(taken_tensors)
        for n in stmts:
            for _, eq in _eqs(n):
                taken.add(eq.lhs.name)
        gen = (t for t in tensor_names() if t not in taken and t[0] not in "LPVBUT")
        for ph in sorted(tensors):
            tensor_map[ph] = next(gen)
    mapping = dict(tensor_map)
    per_stmt, renamed = [], []
    for n, phs, text in zip(stmts, loops, texts):
        names = dict(tensor_map)
        if phs:
            taken = {v for v in _nest_vars(n) if not v.startswith("#")} | _AVOID
            for ph in sorted(phs):
                prefix, _, hint = ph[1:].partition(".")
                if prefix and prefix + hint not in taken:
                    name = prefix + hint
                else:
                    name = next(prefix + w for w in loop_names() if prefix + w not in taken)
                taken.add(name)
                names[ph] = name
                mapping.setdefault(ph, name)
        per_stmt.append(names)
        renamed.append(rename_text(text, names))
    return per_stmt, mapping, renamed


def _eqs(n):
    return equations((n,))
