"""How a program's statements become CUDA kernels that compute what LEIR's sequential
semantics says (leir.md 7.1-7.2).

A ``B`` loop is a promise that its iterations may run at once. LEIR cannot enforce that
promise, so before the CUDA lowering binds a loop to threads or blocks this module checks it,
one kernel at a time (a kernel is everything under a statement's outermost bound loop; all
threads of a kernel run at once, kernels run one after the other):

* a *reduction over a bound loop* (``B^{128}_{tx}[I=I+H_{tx}]``) is lowered as TVM's
  cross-thread all-reduce when TVM can do that exactly: the equation is a first write with an
  implied identity (``T.init``), it is the tensor's only writer in the program, its
  right-hand side is ``X op e`` for ``op`` in ``+ - * max min`` with ``e`` not reading ``X``
  (``X - a + b`` is reassociated into ``X + (-a + b)``), the bound reduction loops are
  ``threadIdx`` loops, every reduction loop of the equation sits in its own nest, which holds
  nothing else (its loops are reordered: spatial ones outermost, then the bound reduction
  loops, then the serial ones, so the whole reduction is inside one kernel and each thread
  first reduces its own terms; the order of a reduction's terms is free), and nothing else
  in its kernel touches ``X``;
* every other tensor a kernel writes must be *owned*: each element it touches is touched by
  one thread only. That holds when some index dimension is the same affine function of the
  hardware indices for every access of the tensor in the kernel and determines every
  hardware index of extent above 1 (``X_{tx,a}``, ``X_{a*128+tx}`` with ``tx<128``, and a
  dimension split by a layout change, ``X_{tx//384,tx%384}``, counts as the one it was);
  shared and local buffers are exempt (TVM places barriers between their phases and gives
  every thread its own local copy), and so is a tensor only one equation of the kernel writes,
  and nothing in it reads, with a value and an element that do not depend on the indices it
  fails to determine (every thread stores the same value: ``B^{128}_{tx}[F=log(I)]``);
* a bound loop that fails these checks is made serial (``L``): for the part of the program
  it covers, the kernel then runs exactly as LEIR's sequential semantics says, only slower.
  ``CudaPlan.serialised`` says which loops and why.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from engine.leir.affine import affine, mixed_radix
from engine.leir.ast import BinOp, Call, Equation, Num, Ref, Unary, Var, walk

TAGS = {"tx": "threadIdx.x", "ty": "threadIdx.y", "tz": "threadIdx.z",
        "bx": "blockIdx.x", "by": "blockIdx.y", "bz": "blockIdx.z"}


def binding_tag(var: str) -> str:
    """The hardware index a bound loop variable is bound to (its two-letter prefix)."""
    return TAGS[var[:2]]


@dataclass(frozen=True)
class CudaPlan:
    """The program as the CUDA lowering emits it: loops permuted and serialised."""

    program: object                      # a Program (same known tensors, same equations in order)
    allreduce: frozenset                 # positions in program.info.equations lowered as all-reduces
    serialised: tuple = ()               # (statement number, loop variable, reason)


# --------------------------------------------------------------------------- loop identities


def _chain(prog, ei):
    """((nest path, Loop), ...) of every loop enclosing ``ei``, outermost first."""
    out = []
    node = prog.body[ei.path[0]]
    path = (ei.path[0],)
    out += [(path, l) for l in node.loops]
    for i in ei.path[1:-1]:
        node = node.body[i]
        path = path + (i,)
        out += [(path, l) for l in node.loops]
    return out


def _nest(prog, path):
    node = prog.body[path[0]]
    for i in path[1:]:
        node = node.body[i]
    return node


def _rewrite(body, serial: set, perms: dict, path=()):
    """``body`` with the loops in ``serial`` ((nest path, var)) made ``L`` and the nests in
    ``perms`` (nest path -> var order) reordered."""
    out = []
    for i, n in enumerate(body):
        p = path + (i,)
        if isinstance(n, Equation):
            out.append(n)
            continue
        loops = [replace(l, kind="L") if (p, l.var) in serial and l.kind == "B" else l for l in n.loops]
        if p in perms:
            by = {l.var: l for l in loops}
            loops = [by[v] for v in perms[p]]
        out.append(replace(n, loops=tuple(loops), body=tuple(_rewrite(n.body, serial, perms, p))))
    return tuple(out)


# --------------------------------------------------------------------------- all-reduce


def combiner(eq):
    """(op, e) with ``eq.rhs`` equal to ``X op e`` up to reassociation, or None."""
    x = eq.lhs

    def mentions_x(e):
        return any(isinstance(n, Ref) and n.name == x.name for n in walk(e))
    rhs = eq.rhs
    if isinstance(rhs, Call) and rhs.func in ("max", "min"):
        a, b = rhs.args
        if a == x and not mentions_x(b):
            return rhs.func, b
        return None
    if not isinstance(rhs, BinOp) or rhs.op not in ("+", "-", "*"):
        return None
    family = ("+", "-") if rhs.op in ("+", "-") else ("*",)
    terms = []
    node = rhs
    while isinstance(node, BinOp) and node.op in family:
        terms.append((node.op, node.rhs))
        node = node.lhs
    if node != x or any(mentions_x(t) for _, t in terms):
        return None
    terms.reverse()
    if family == ("*",):
        e = terms[0][1]
        for _, t in terms[1:]:
            e = BinOp("*", e, t)
        return "*", e
    e = None
    for op, t in terms:
        term = Unary("-", t) if op == "-" else t
        e = term if e is None else BinOp("+", e, term)
    return "+", e


def reduction_axes(ei, chain=None) -> set[str]:
    """The reduction axes of an equation that take more than one value (an extent-1 axis is
    always 0: it reduces nothing, and the all-reduce lowering declares it spatial)."""
    ext = {l.var: l.extent for l in ei.loops}
    return {v for v in ei.reduction_axes if ext[v] > 1}


def _allreduce_obstacle(prog, ei) -> tuple[str | None, dict]:
    """Why ``ei`` (a reduction over a bound loop) cannot be a TVM all-reduce (None if it can),
    and the nest permutation it needs."""
    from .injective import is_injective
    info = prog.info
    eq = ei.eq
    chain = _chain(prog, ei)
    red = reduction_axes(ei, chain)
    bound_red = [l for _, l in chain if l.var in red and l.kind == "B"]
    if any(not l.var.startswith("t") for l in bound_red):
        return "it reduces over a block index (blocks cannot combine partial results)", {}
    if eq.init is None:
        return "it updates a tensor already written (no identity to start the threads from)", {}
    if info.buffers[eq.lhs.name].scope != "g":
        return "it reduces into a shared or local buffer", {}
    if len(info.writers(eq.lhs.name)) != 1:
        return f"'{eq.lhs.name}' has other writers", {}
    comb = combiner(eq)
    if comb is None:
        return "its right-hand side is not X+e, X-e, X*e, max(X,e) or min(X,e)", {}
    if info.buffers[eq.lhs.name].dtype not in _FLOAT_CODES and _float_valued(comb[1], info):
        return "it accumulates real values into an integer tensor (each step rounds)", {}
    spatial = {l.var: l.extent for _, l in chain if l.var not in red}
    if not is_injective(eq.lhs.index, spatial):
        return "several spatial iterations share one element", {}
    home = ei.path[:-1]
    nest = _nest(prog, home)
    if any(p != home for p, l in chain if l.var in red):
        return "its reduction loops are spread over nested loop nests", {}
    if len(nest.body) != 1:
        return "its loop nest holds other equations or nests", {}
    # spatial loops first, then the bound reduction loops, then the serial ones: every
    # reduction loop is then inside the kernel, the serial ones reduce within a thread first
    order = ([l.var for l in nest.loops if l.var not in red]
             + [l.var for l in nest.loops if l.var in red and l.kind == "B"]
             + [l.var for l in nest.loops if l.var in red and l.kind != "B"])
    perm = {} if order == [l.var for l in nest.loops] else {home: tuple(order)}
    return None, perm


_FLOAT_CODES = ("f16", "bf16", "f32", "f64")


def _float_valued(e, info) -> bool:
    """Whether ``e`` may have a non-integer value (a float read or literal, ``/``, ``**``, ...)."""
    for n in walk(e):
        if isinstance(n, Ref) and info.buffers[n.name].dtype in _FLOAT_CODES:
            return True
        if isinstance(n, Num) and not n.is_int:
            return True
        if isinstance(n, BinOp) and n.op in ("/", "**"):
            return True
        if isinstance(n, Call) and n.func in ("exp", "log", "sqrt", "erf"):
            return True
    return False


# --------------------------------------------------------------------------- ownership


def _access_list(prog, ei, skip: str | None = None):
    """(ref, is_write) for the tensor accesses of one equation (``skip``: a name left out)."""
    eq = ei.eq
    out = [] if eq.lhs.name == skip else [(eq.lhs, True)]
    for e in (*eq.lhs.index, eq.rhs):
        out += [(n, False) for n in walk(e) if isinstance(n, Ref) and n.name != skip]
    return out


def _determined(accesses, kernel_tags: dict) -> set[str]:
    """Hardware indices that the accessed element determines, over all ``accesses``
    (each: (ref, {var: tag}, {var: extent} of in-kernel loops, {var: extent} of host loops))."""
    if not accesses:
        return set(kernel_tags)
    rank = len(accesses[0][0].index)
    if any(len(a[0].index) != rank for a in accesses):
        return set()
    entries = [_unsplit(a[0].index) for a in accesses]
    found: set[str] = set()
    for d in range(rank):
        forms = []
        for (_ref, tag_of, inner, host), index in zip(accesses, entries):
            extents = {**inner, **host}
            a = affine(index[d], extents) if index[d] is not None else None
            if a is None:
                forms = None
                break
            tags, free, fixed = {}, [], {}
            for v, c in a.items():
                if v == 1 or c == 0:
                    continue
                if v in tag_of:
                    if kernel_tags.get(tag_of[v], 1) > 1:
                        tags[tag_of[v]] = tags.get(tag_of[v], 0) + c
                elif v in host:
                    fixed[v] = c
                elif inner.get(v, 1) > 1:
                    free.append((c, inner[v]))
            forms.append((tags, sorted(free), fixed, a.get(1, 0)))
        if not forms:
            continue
        tags, free, fixed, const = forms[0]
        if any(f[0] != tags or f[2] != fixed for f in forms) or not tags:
            continue
        ext = {t: kernel_tags[t] for t in tags}
        if all(f == forms[0] for f in forms):
            # one template: the element determines every index of a mixed-radix combination
            names = {f"free{k}": e for k, (_, e) in enumerate(free)}
            terms = [(c, t) for t, c in tags.items()] + [(c, f"free{k}") for k, (c, _) in enumerate(free)]
            if mixed_radix(terms, {**ext, **names}):
                found |= set(tags)
                continue
        # different free parts: the hardware part must step over all of their range at once
        lo = min(f[3] + sum(min(0, c * (e - 1)) for c, e in f[1]) for f in forms)
        hi = max(f[3] + sum(max(0, c * (e - 1)) for c, e in f[1]) for f in forms)
        reach, ok = hi - lo, True
        for c, t in sorted((abs(c), t) for t, c in tags.items()):
            if c <= reach:
                ok = False
                break
            reach += c * (ext[t] - 1)
        if ok:
            found |= set(tags)
    return found


def _redundant(info, chains, accesses, missing: set) -> bool:
    """Every thread along ``missing`` stores the same value: the tensor is only written, by one
    equation, whose value and element do not depend on those indices (``B^{128}_{tx}[F=log(I)]``)."""
    ks = {k for k, _ in accesses}
    if len(ks) != 1 or not all(w for _, w in accesses):
        return False
    k = ks.pop()
    eq = info.equations[k].eq
    bound = {l.var for _, l in chains[k] if l.kind == "B" and binding_tag(l.var) in missing}
    used = {n.name for e in (eq.rhs, *eq.lhs.index) for n in walk(e) if isinstance(n, Var)}
    return not used & bound


def _unsplit(index) -> list:
    """``index`` with each pair of entries ``e//k`` and ``e%k`` (a dimension split by a layout
    change) replaced by ``e`` in the first and None in the second: together they are ``e``."""
    out = list(index)
    for i, x in enumerate(index):
        if isinstance(x, BinOp) and x.op == "//" and isinstance(x.rhs, Num) and x.rhs.is_int:
            for j, y in enumerate(index):
                if (isinstance(y, BinOp) and y.op == "%" and y.lhs == x.lhs and isinstance(y.rhs, Num)
                        and y.rhs.text == x.rhs.text and out[j] is not None):
                    out[i], out[j] = x.lhs, None
                    break
    return out


def _kernels(prog):
    """{kernel root (nest path, var): [(equation position, chain index of the root)]}."""
    out: dict = {}
    for k, ei in enumerate(prog.info.equations):
        chain = _chain(prog, ei)
        for j, (p, l) in enumerate(chain):
            if l.kind == "B":
                out.setdefault((p, l.var), []).append((k, j))
                break
    return out


def _races(prog, allreduce: set, found: list) -> set:
    """Loops to serialise so that every kernel owns what it writes; ``found`` gets
    (statement, var, reason) entries."""
    info = prog.info
    serial: set = set()
    for (_root_path, _root_var), members in sorted(_kernels(prog).items()):
        chains = {k: _chain(prog, info.equations[k]) for k, _ in members}
        kernel_tags: dict[str, int] = {}
        loops_of_tag: dict[str, set] = {}
        for k, j in members:
            for p, l in chains[k][j:]:
                if l.kind == "B":
                    t = binding_tag(l.var)
                    kernel_tags[t] = max(kernel_tags.get(t, 1), l.extent)
                    loops_of_tag.setdefault(t, set()).add((p, l.var))
        reduced = {info.equations[k].eq.lhs.name: k for k, _ in members if k in allreduce}
        by_tensor: dict[str, list] = {}
        writers: dict[str, list] = {}
        writes: set[str] = set()
        for k, j in members:
            ei = info.equations[k]
            chain = chains[k]
            host = {l.var: l.extent for _, l in chain[:j]}
            inner = {l.var: l.extent for _, l in chain[j:]}
            tag_of = {l.var: binding_tag(l.var) for _, l in chain[j:] if l.kind == "B"}
            skip = ei.eq.lhs.name if k in allreduce else None
            for ref, w in _access_list(prog, ei, skip):
                if ref.name in reduced:
                    # another equation of the kernel sees a partial all-reduce: run it serially
                    e = info.equations[reduced[ref.name]]
                    for p, l in _chain(prog, e):
                        if l.var in reduction_axes(e) and l.kind == "B":
                            serial.add((p, l.var))
                            found.append((e.path[0] + 1, l.var, f"reduction into '{ref.name}' over a bound "
                                          "loop that is not an all-reduce: another equation of its kernel "
                                          "reads or writes it"))
                    continue
                if info.buffers[ref.name].scope != "g":
                    continue
                by_tensor.setdefault(ref.name, []).append((ref, tag_of, inner, host))
                writers.setdefault(ref.name, []).append((k, w))
                if w:
                    writes.add(ref.name)
        for name in sorted(writes):
            need = {t for t, n in kernel_tags.items() if n > 1}
            missing = need - _determined(by_tensor[name], kernel_tags)
            if missing and _redundant(info, chains, writers[name], missing):
                continue
            for t in sorted(missing):
                for p, v in sorted(loops_of_tag[t]):
                    serial.add((p, v))
                    found.append((p[0] + 1, v, f"threads of {t} would race on '{name}'"))
    return serial


# --------------------------------------------------------------------------- the plan


def plan_cuda(program) -> CudaPlan:
    """The kernels of ``program`` (see the module docstring)."""
    serial: set = set()
    perms: dict = {}
    found: list = []
    prog = program
    for _ in range(64):
        info = prog.info
        allreduce: set = set()
        new_serial, new_perms = set(), {}
        for k, ei in enumerate(info.equations):
            chain = _chain(prog, ei)
            bound_red = [(p, l) for p, l in chain if l.var in reduction_axes(ei, chain) and l.kind == "B"]
            if not bound_red:
                continue
            why, perm = _allreduce_obstacle(prog, ei)
            if why is None:
                allreduce.add(k)
                new_perms.update(perm)
            else:
                for p, l in bound_red:
                    new_serial.add((p, l.var))
                    found.append((ei.path[0] + 1, l.var, f"reduction into '{ei.eq.lhs.name}' over a bound "
                                                          f"loop that is not an all-reduce: {why}"))
        if not new_serial and not new_perms:
            new_serial = _races(prog, allreduce, found)
        if not new_serial and not new_perms:
            return CudaPlan(prog, frozenset(allreduce), _unique(found))
        serial |= new_serial
        for p, order in new_perms.items():
            perms[p] = order
        prog = program.with_body(_rewrite(program.body, serial, perms))
    raise RuntimeError("internal: the CUDA kernel plan did not converge")  # pragma: no cover


def _unique(found):
    return tuple(dict.fromkeys(found))
