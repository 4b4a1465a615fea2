"""Where shared and local intermediates are allocated (lowering.md 9.6: never at function level,
where TVM 0.27 turns them into extra kernel pointer parameters).

A shared/local buffer must be used inside one top-level statement. It is allocated in a
wrapper ``T.sblock("alloc_<path>")`` inside the deepest nest that contains all its
accesses, right after that nest's last bound loop (last ``b*`` block-index loop for
``shared``). Every loop enclosing the allocation must index the buffer by its variable
alone in one fixed dimension in every access; that dimension is dropped from the
allocation, so each per-iteration (per-thread, per-block) copy is exactly one slice of
the logical buffer and no value crosses copies: the placement is sound under LEIR's
sequential semantics. (On ``cuda`` thread loops enclosing a *shared* allocation are
exempt and keep their dimension: the threads of a block share one copy.) On ``cuda`` a
statement with no bound loop gets the one-block launch so the buffer is inside a kernel,
and anything that cannot be placed soundly (a buffer used by several statements, an
access not private to its copy, a local buffer also accessed under a deeper bound loop)
is a ``LoweringError``. On ``llvm`` such buffers fall back to a global scratch buffer
(a CPU has one memory space; the result stays exact).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.leir.ast import Nest

from ..errors import LoweringError
from .access import accesses, private_dim


@dataclass
class _Site:
    """Where shared/local buffers are allocated: inside nest ``path``, after its first ``k`` loops."""

    k: int = 0
    buffers: list = field(default_factory=list)  # (name, shape, scope)


def _nest_at(prog, path: tuple[int, ...]) -> tuple[Nest, list]:
    """The nest at ``path`` and the nests enclosing it (outermost first)."""
    node = prog.body[path[0]]
    outer = []
    for i in path[1:]:
        outer.append(node)
        node = node.body[i]
    return node, outer


def _common_prefix(paths):
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        for j in range(n):
            if p[j] != first[j]:
                n = j
                break
    return first[:n]


def place_scoped(prog, target: str):
    """Allocation sites: ({nest path: _Site}, {top stmt needing a launch}, function-level
    buffers, {name: elided dims}, {name: allocated shape})."""
    info = prog.info
    eq_paths: dict[str, list[tuple[int, ...]]] = {}
    for ei in info.equations:
        eq = ei.eq
        names = [eq.lhs.name] + [r.name for r, _ in accesses([eq]) if r is not eq.lhs]
        for name in dict.fromkeys(names):
            eq_paths.setdefault(name, []).append(ei.path[:-1])
    sites: dict[tuple[int, ...], _Site] = {}
    launches: set[int] = set()
    func_level: list = []
    elided: dict[str, tuple[int, ...]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for b in info.buffers.values():
        shapes[b.name] = b.shape
        if b.role != "intermediate":
            continue
        if b.scope == "g":
            func_level.append((b.name, b.shape, "global"))
            continue
        scope = "shared" if b.scope == "s" else "local"
        try:
            path, k, dims, launch = _site_for(prog, b, scope, target, eq_paths.get(b.name, []))
        except LoweringError:
            if target == "cuda":
                raise
            func_level.append((b.name, b.shape, "global"))
            continue
        site = sites.setdefault(path, _Site(k))
        if site.k != k:  # pragma: no cover - k depends only on the nest and the scope
            raise LoweringError(f"{scope} buffer '{b.name}' needs a second allocation site in one nest",
                                _first_ref(prog, b.name))
        keep = tuple(n for d, n in enumerate(b.shape) if d not in dims)
        site.buffers.append((b.name, keep, scope))
        shapes[b.name] = keep
        if dims:
            elided[b.name] = dims
        if launch:
            launches.add(path[0])
    return sites, launches, func_level, elided, shapes


def _first_ref(prog, name: str):
    for r, _ in accesses(prog.body):
        if r.name == name:
            return r
    return None


def _site_for(prog, buf, scope: str, target: str, paths):
    """(nest path, k, elided dims, needs a one-block launch) for one shared/local buffer."""
    where = _first_ref(prog, buf.name)
    tops = list(dict.fromkeys(p[0] for p in paths))
    if len(tops) != 1:
        raise LoweringError(
            f"{scope} buffer '{buf.name}' is used by top-level statements "
            f"{', '.join(str(i + 1) for i in tops)}; its contents do not survive a kernel boundary "
            "(make it global or keep it inside one statement)", where)
    path = _common_prefix(paths)
    nest, outer = _nest_at(prog, path)

    def qualifies(l):
        return l.kind == "B" and (scope == "local" or l.var.startswith("b"))
    k = 0
    for j, l in enumerate(nest.loops):
        if qualifies(l):
            k = j + 1
    enclosing = [l for n in outer for l in n.loops] + list(nest.loops[:k])
    refs = [r for r, _ in accesses([nest]) if r.name == buf.name]
    dims: list[int] = []
    for l in enclosing:
        if target == "cuda" and scope == "shared" and l.kind == "B" and l.var.startswith("t"):
            continue  # threads of one block share the buffer: keep the dimension
        d = private_dim(l.var, refs, set(dims))
        if d is None:
            raise LoweringError(
                f"{scope} buffer '{buf.name}' cannot be allocated inside loop '{l.var}': some access "
                f"does not index it by '{l.var}' alone in one fixed dimension, so values would "
                "cross iterations", refs[0])
        dims.append(d)
    launch = False
    if target == "cuda":
        below = _bound_loops_over(nest, buf.name, k)
        bad = [v for v in below if scope == "local" or v.startswith("b")]
        if bad:
            raise LoweringError(
                f"{scope} buffer '{buf.name}' is accessed under bound loop '{bad[0]}' below its "
                "allocation site, so it cannot be placed inside the kernel", refs[0])
        if not any(l.kind == "B" for l in enclosing):
            top = prog.body[path[0]]
            if has_bound(top):
                raise LoweringError(
                    f"{scope} buffer '{buf.name}' would be allocated outside the statement's bound "
                    "loops (it would become global memory)", refs[0])
            launch = True
    return path, k, tuple(sorted(dims)), launch


def _bound_loops_over(nest: Nest, name: str, k: int) -> list[str]:
    """Bound loops of ``nest`` after its first ``k`` loops, or in its sub-nests, that enclose an
    access of ``name``."""
    out: list[str] = []

    def visit(n: Nest, loops):
        for it in n.body:
            if isinstance(it, Nest):
                visit(it, loops + [l.var for l in it.loops if l.kind == "B"])
            elif any(r.name == name for r, _ in accesses([it])):
                out.extend(v for v in loops if v not in out)

    visit(nest, [l.var for l in nest.loops[k:] if l.kind == "B"])
    return out


def binds_block(nest: Nest) -> bool:
    """Whether a loop of ``nest`` or of a sub-nest is bound to a block index."""
    return any(l.kind == "B" and l.var.startswith("b") for l in nest.loops) or any(
        isinstance(it, Nest) and binds_block(it) for it in nest.body)


def has_bound(nest: Nest) -> bool:
    return any(l.kind == "B" for l in nest.loops) or any(
        isinstance(it, Nest) and has_bound(it) for it in nest.body)
