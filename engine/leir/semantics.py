"""Semantic analysis of a LEIR program (leir.md sections 3.6, 7 and 8).

Decides, once, everything the text leaves implicit: which tensors are known and which are
intermediates, each intermediate's dtype, scope and shape (from real index ranges), the
reduction initialisation of every equation, reduction axes, and def-use order. It also
rejects programs that cannot mean anything: reads out of bounds, reads before writes,
writes to inputs, bad binding names, hardware limits, duplicate bindings.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from engine.leir.ast import (DTYPES, BinOp, Call, Compare, Equation, Loop, Nest, Num, Ref, TensorDecl, Unary,
                  Var, equations, loop_vars, walk)
from engine.leir.diagnostics import LeirError, quoted
from engine.leir.intervals import Env, Interval, NotAffine, interval, refine
from engine.leir.limits import check_tree, extent_error, mark_checked, tensor_name_error
from engine.leir.printer import expr_to_str, ref_to_str

INTEGER_DTYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}

# Hardware limits (leir.md 3.6): per axis extent for threads and blocks.
THREAD_LIMITS = {"x": 1024, "y": 1024, "z": 64}
BLOCK_LIMITS = {"x": 2**31 - 1, "y": 65535, "z": 65535}
MAX_THREADS_PER_BLOCK = 1024
# Memory limits (not in leir.md 3.6; CUDA C Programming Guide, technical specifications, every
# compute capability since 2.0), checked by the shared / local scope guards (engine/facts.py):
# static __shared__ memory of one block (more needs dynamic shared memory and an opt-in the
# lowering does not emit; ptxas refuses "uses too much shared data (0xc004 bytes, 0xc000 max)")
# and local memory of one thread (ptxas accepts more, measured up to 4 MiB: the launch is what fails).
SHARED_BYTES_PER_BLOCK = 48 * 1024
LOCAL_BYTES_PER_THREAD = 512 * 1024
BINDING_PREFIXES = ("tx", "ty", "tz", "bx", "by", "bz")


@dataclass(frozen=True)
class Buffer:
    """A tensor of the program: its element type, scope, (inferred) shape and role."""

    name: str
    dtype: str
    scope: str
    shape: tuple[int, ...]
    role: str  # "input" | "output" | "intermediate"


@dataclass(frozen=True)
class EqInfo:
    """Facts about one equation, in execution order."""

    path: tuple[int, ...]            # indices into the body tree (top-level nest first)
    loops: tuple[Loop, ...]          # all enclosing loops, outermost first
    eq: Equation
    reduction_axes: tuple[str, ...]  # enclosing loop vars absent from the LHS index of an update
    is_update: bool                  # the LHS tensor is read on the RHS at the same index
    reads: tuple[str, ...] = field(default=())  # names of tensors read, first-read order


@dataclass(frozen=True)
class ProgramInfo:
    buffers: dict[str, Buffer]
    equations: tuple[EqInfo, ...]
    warnings: tuple[LeirError, ...] = ()  # located, non-fatal findings (e.g. inconsistent superscripts)

    @property
    def intermediates(self) -> list[Buffer]:
        return [b for b in self.buffers.values() if b.role == "intermediate"]

    def writers(self, name: str) -> list[EqInfo]:
        return [e for e in self.equations if e.eq.lhs.name == name]

    def readers(self, name: str) -> list[EqInfo]:
        return [e for e in self.equations if name in e.reads]


def _err(msg: str, node) -> LeirError:
    p = getattr(node, "pos", None)
    return LeirError(msg, p.line if p else None, p.col if p else None)


# --------------------------------------------------------------------------- initialisation


def implied_init(eq: Equation, already_written: bool) -> Optional[str]:
    """The reduction identity the implicit form implies (leir.md 7.3, case A), or None.

    Decided on the canonical text, exactly as the printed program will be read back.
    """
    if already_written:
        return None
    x = ref_to_str(eq.lhs)
    rhs = expr_to_str(eq.rhs)
    if rhs.startswith(x) and len(rhs) > len(x):
        nxt = rhs[len(x):]
        if nxt[0] in "+-":
            return "0"
        if nxt[0] == "*" and not nxt.startswith("**"):
            return "1"
    for func, identity in (("max", "-inf"), ("min", "inf")):
        if rhs.startswith(f"{func}({x},"):
            return identity
    for op in ("//", "/", "%"):
        if rhs.endswith(op + x) and len(rhs) > len(x) + len(op):
            return "1"
    return None


def _shifted(read: Ref, lhs: Ref) -> bool:
    """``read`` indexes ``lhs`` at an earlier point of the same loops: entries equal or ``v-k``."""
    if len(read.index) != len(lhs.index):
        return False
    shifted = False
    for r, w in zip(read.index, lhs.index):
        if r == w:
            continue
        if isinstance(r, BinOp) and r.op == "-" and r.lhs == w and isinstance(r.rhs, Num) \
                and r.rhs.is_int and int(r.rhs.text) > 0:
            shifted = True
            continue
        return False
    return shifted


# --------------------------------------------------------------------------- the analysis


class _Analyzer:
    def __init__(self, inputs, outputs, check_inits: bool):
        self.check_inits = check_inits
        self.known: dict[str, tuple[TensorDecl, str]] = {}
        for role, decls in (("input", inputs), ("output", outputs)):
            for d in decls:
                msg = tensor_name_error(d.name)
                if msg:
                    raise _err(msg, d)
                if d.name in self.known:
                    raise _err(f"tensor '{d.name}' is declared twice", d)
                if d.dtype not in DTYPES:
                    raise _err(f"unknown dtype code {quoted(d.dtype)} for '{d.name}'", d)
                for s in d.shape:
                    msg = extent_error(s, f"each dimension of '{d.name}'")
                    if msg:
                        raise _err(msg, d)
                self.known[d.name] = (d, role)
        self.written: set[str] = set()
        self.first_seen: dict[str, Ref] = {}       # intermediates: first occurrence (dtype/scope)
        self.write_ranges: dict[str, list[tuple[Ref, list[Interval]]]] = {}
        self.pending_reads: list[tuple[Ref, Env]] = []  # intermediate reads, checked once shapes are known
        self.values: dict[str, Optional[Interval]] = {}  # integer intermediates: range of stored values
        self.eqinfos: list[EqInfo] = []
        self.warnings: list[LeirError] = []
        self.all_written: set[str] = set()

    # -- checks on references ------------------------------------------------------------
    def _check_ref_decl(self, r: Ref):
        if r.name in self.known:
            d, _ = self.known[r.name]
            if r.dtype != d.dtype:
                raise _err(f"'{r.name}' is declared {d.dtype} but used as {r.dtype}", r)
            if r.scope != "g":
                raise _err(f"known tensor '{r.name}' is a function parameter and must have scope g, "
                           f"not {r.scope}", r)
            if len(r.index) != len(d.shape):
                raise _err(f"'{r.name}' has rank {len(d.shape)} but is indexed with "
                           f"{len(r.index)} subscript{'s' if len(r.index) != 1 else ''}", r)
            return
        first = self.first_seen.get(r.name)
        if first is None:
            self.first_seen[r.name] = r
            return
        if (first.dtype, first.scope) != (r.dtype, r.scope):
            # leir.md 8 item 4: the first occurrence decides; the reference translator emits such
            # reads (an f64 scalar read back as i32), so this is a warning, not an error.
            self.warnings.append(_err(f"'{r.name}' is {first.dtype},{first.scope} at its first use but "
                                      f"{r.dtype},{r.scope} here; the first occurrence decides", r))
        if len(first.index) != len(r.index):
            raise _err(f"'{r.name}' is used with rank {len(first.index)} and with rank {len(r.index)}", r)

    def _index_ranges(self, r: Ref, env: Env) -> list[Optional[Interval]]:
        out = []
        for e in r.index:
            for n in walk(e):
                if isinstance(n, Ref):
                    if n.dtype not in INTEGER_DTYPES:
                        raise _err(f"'{n.name}' ({n.dtype}) cannot be used as an index: indices are integers", n)
                elif isinstance(n, Num) and not n.is_int:
                    raise _err(f"'{n.text}' cannot be used in an index: indices are integers", n)
                elif isinstance(n, (Call, Compare)) and not (isinstance(n, Call) and n.func in ("max", "min")):
                    raise _err(f"'{expr_to_str(n)}' cannot be used in an index", n)
                elif isinstance(n, BinOp) and n.op not in ("+", "-", "*", "//", "%"):
                    raise _err(f"operator '{n.op}' cannot be used in an index (use //, %, +, -, *)", n)
            try:
                out.append(interval(e, env, self._ref_value_range))
            except NotAffine as ex:
                raise _err(f"index '{expr_to_str(e)}' of '{r.name}': {ex}", e if getattr(e, 'pos', None) else r) from ex
        return out

    def _ref_value_range(self, r: Ref) -> Optional[Interval]:
        return self.values.get(r.name)

    def _check_read_bounds(self, r: Ref, env: Env):
        ranges = self._index_ranges(r, env)
        if r.name in self.known:
            shape = self.known[r.name][0].shape
            self._check_in(r, ranges, shape)
        else:
            self.pending_reads.append((r, env))

    @staticmethod
    def _check_in(r: Ref, ranges, shape):
        for k, (rng, n) in enumerate(zip(ranges, shape)):
            if rng is None:
                continue
            if rng[0] < 0 or rng[1] >= n:
                raise _err(f"read of '{r.name}' out of bounds: index {k} "
                           f"('{expr_to_str(r.index[k])}') ranges over [{rng[0]}, {rng[1]}] "
                           f"but the dimension has size {n}", r)

    # -- expressions -----------------------------------------------------------------------
    def _reads(self, e, env: Optional[Env], vars_in_scope: set[str], out: list[Ref]):
        """Collect reads of ``e`` with the loop ranges valid where each read happens."""
        if isinstance(e, Var):
            if e.name not in vars_in_scope:
                raise _err(f"'{e.name}' is not a loop variable of an enclosing loop", e)
            return
        if isinstance(e, Ref):
            self._check_ref_decl(e)
            for sub in e.index:
                self._reads(sub, env, vars_in_scope, out)
            if env is not None:
                out.append((e, env))
            return
        if isinstance(e, Call) and e.func == "if_then_else":
            cond, a, b = e.args
            self._reads(cond, env, vars_in_scope, out)
            self._reads(a, None if env is None else refine(env, cond, True), vars_in_scope, out)
            self._reads(b, None if env is None else refine(env, cond, False), vars_in_scope, out)
            return
        for c in (e.args if isinstance(e, Call) else
                  e.operands if isinstance(e, Compare) else
                  (e.lhs, e.rhs) if isinstance(e, BinOp) else
                  (e.operand,) if isinstance(e, Unary) else ()):
            self._reads(c, env, vars_in_scope, out)

    # -- statements ------------------------------------------------------------------------
    def nest(self, n: Nest, outer: tuple[Loop, ...], path: tuple[int, ...]) -> Nest:
        loops = outer + n.loops
        seen: dict[str, Loop] = {}
        for l in loops:
            if l.var in seen:
                raise _err(f"loop variable '{l.var}' is bound twice in one nest", l)
            seen[l.var] = l
        self._check_bindings(n.loops, loops)
        body = []
        for i, it in enumerate(n.body):
            if isinstance(it, Nest):
                body.append(self.nest(it, loops, path + (i,)))
            else:
                body.append(self.equation(it, loops, path + (i,)))
        return replace(n, body=tuple(body))

    def _check_bindings(self, new: tuple[Loop, ...], loops: tuple[Loop, ...]):
        for l in new:
            if l.kind == "B" and not l.var.startswith(BINDING_PREFIXES):
                raise _err(f"bound loop '{l.var}' must be named tx, ty, tz, bx, by or bz followed by "
                           "optional lowercase letters (the prefix selects the hardware axis)", l)
        tags: dict[str, Loop] = {}
        threads = 1
        for l in loops:
            if l.kind != "B":
                continue
            tag = l.var[:2]
            if tag in tags:
                raise _err(f"loops '{tags[tag].var}' and '{l.var}' are both bound to "
                           f"{'threadIdx' if tag[0] == 't' else 'blockIdx'}.{tag[1]} in one nest", l)
            tags[tag] = l
            limit = (THREAD_LIMITS if tag[0] == "t" else BLOCK_LIMITS)[tag[1]]
            if l.extent > limit:
                raise _err(f"bound loop '{l.var}' has extent {l.extent}, above the hardware limit {limit} "
                           f"for {'threadIdx' if tag[0] == 't' else 'blockIdx'}.{tag[1]}", l)
            if tag[0] == "t":
                threads *= l.extent
                if threads > MAX_THREADS_PER_BLOCK:
                    raise _err(f"bound thread loops multiply to {threads} threads per block, above the "
                               f"limit {MAX_THREADS_PER_BLOCK}", l)

    def equation(self, eq: Equation, loops: tuple[Loop, ...], path: tuple[int, ...]) -> Equation:
        x = eq.lhs
        self._check_ref_decl(x)
        vars_in_scope = {l.var for l in loops}
        env: Env = {l.var: (0, l.extent - 1) for l in loops}
        if x.name in self.known and self.known[x.name][1] == "input":
            raise _err(f"input '{x.name}' is written; inputs are read-only (write an intermediate instead)", x)

        # LHS: index reads, write range
        lhs_reads: list = []
        for sub in x.index:
            self._reads(sub, env, vars_in_scope, lhs_reads)
        write = self._index_ranges(x, env)
        if any(r is None for r in write):
            raise _err(f"cannot infer the shape of '{x.name}': it is written through a tensor-valued index", x)
        for k, (lo, hi) in enumerate(write):
            if lo < 0:
                raise _err(f"write to '{x.name}' at a negative index: index {k} "
                           f"('{expr_to_str(x.index[k])}') ranges over [{lo}, {hi}]", x)
        if x.name in self.known:
            self._check_in_write(x, write)
        self.write_ranges.setdefault(x.name, []).append((x, write))

        # RHS reads and def-use
        rhs_reads: list = []
        self._reads(eq.rhs, env, vars_in_scope, rhs_reads)
        already = x.name in self.written
        init = implied_init(eq, already)
        if self.check_inits and init != eq.init:
            raise _err(f"the equation for '{x.name}' would be read back with initialisation "
                       f"{init or 'none'} instead of {eq.init or 'none'}: the rewrite changes its meaning", x)
        is_update = any(r.name == x.name and r == x for r, _ in rhs_reads)
        for r, renv in lhs_reads + rhs_reads:
            if r.name in self.known and self.known[r.name][1] == "input":
                self._check_read_bounds(r, renv)
                continue
            if r.name == x.name and not already:
                if r == x and init is not None:
                    continue
                if _shifted(r, x):
                    self._check_read_bounds(r, renv)
                    continue
                raise _err(f"'{r.name}' is read before it is written", r)
            if r.name not in self.written and r.name != x.name:
                if r.name not in self.known and r.name not in self.all_written:
                    raise _err(f"'{r.name}' is not a known tensor and is never written "
                               "(declare it as an input, or check its spelling)", r)
                raise _err(f"'{r.name}' is read before it is written", r)
            self._check_read_bounds(r, renv)
        self.written.add(x.name)

        # value range of integer intermediates, for tensor-valued indices that read them
        if x.name not in self.known and x.dtype in INTEGER_DTYPES:
            try:
                rng = None if is_update else interval(eq.rhs, env, self._ref_value_range)
            except NotAffine:
                rng = None
            if x.name in self.values:
                prev = self.values[x.name]
                rng = None if rng is None or prev is None else (min(rng[0], prev[0]), max(rng[1], prev[1]))
            self.values[x.name] = rng

        lhs_vars = set()
        for sub in x.index:
            lhs_vars |= loop_vars(sub)
        red = tuple(l.var for l in loops if l.var not in lhs_vars) if is_update else ()
        reads = tuple(dict.fromkeys(r.name for r, _ in lhs_reads + rhs_reads))
        new_eq = eq if eq.init == init else replace(eq, init=init)
        self.eqinfos.append(EqInfo(path, loops, new_eq, red, is_update, reads))
        return new_eq

    def _check_in_write(self, x: Ref, write):
        shape = self.known[x.name][0].shape
        for k, ((_lo, hi), n) in enumerate(zip(write, shape)):
            if hi >= n:
                raise _err(f"write to '{x.name}' out of bounds: index {k} ('{expr_to_str(x.index[k])}') "
                           f"reaches {hi} but the declared dimension has size {n}", x)

    # -- whole program ---------------------------------------------------------------------
    def finish(self) -> dict[str, Buffer]:
        buffers: dict[str, Buffer] = {}
        for name, (d, role) in self.known.items():
            buffers[name] = Buffer(name, d.dtype, "g", tuple(d.shape), role)
        for name, (d, role) in self.known.items():
            if role != "output":
                continue
            if name not in self.write_ranges:
                raise _err(f"output '{name}' is never written", d)
            inferred = tuple(max(w[k][1] for _, w in self.write_ranges[name]) + 1 for k in range(len(d.shape)))
            if inferred != tuple(d.shape):
                first = self.write_ranges[name][0][0]
                raise _err(f"output '{name}' is declared with shape {list(d.shape)} but the program writes "
                           f"shape {list(inferred)}", first)
        for name, ref in self.first_seen.items():
            if name not in self.write_ranges:
                raise _err(f"'{name}' is not a known tensor and is never written "
                           "(declare it as an input, or check its spelling)", ref)
            sites = self.write_ranges[name]
            shape = tuple(max(w[k][1] for _, w in sites) + 1 for k in range(len(ref.index)))
            buffers[name] = Buffer(name, ref.dtype, ref.scope, shape, "intermediate")
        for r, env in self.pending_reads:
            self._check_in(r, self._index_ranges(r, env), buffers[r.name].shape)
        return buffers


def analyze(inputs, outputs, body, check_inits: bool = False):
    """Check a program and return (body with explicit inits, ProgramInfo).

    With ``check_inits`` the inits carried by ``body`` must equal those its text implies;
    rewrites use this to prove that printing their result does not change its meaning.
    """
    if not body:
        raise LeirError("empty program: expected at least one loop nest")
    check_tree(body)  # well formed and at most MAX_DEPTH deep: everything below may recurse
    a = _Analyzer(inputs, outputs, check_inits)
    a.all_written = {eq.lhs.name for _, eq in equations(body)}
    new_body = tuple(a.nest(n, (), (i,)) for i, n in enumerate(body))
    mark_checked(new_body)
    buffers = a.finish()
    return new_body, ProgramInfo(buffers, tuple(a.eqinfos), tuple(a.warnings))
