"""LEIR ``Program`` -> TVMScript text (one ``@T.prim_func(s_tir=True) def main``) -> TVM PrimFunc.

The text is generated from the analysed program (``program.info``), deterministically:

* parameters are the program's inputs then outputs, in declared order, then the *scratch*
  buffers (``Lowered.scratch``): every global intermediate with its inferred shape, in
  first-use order, and the float32 accumulator of a half-precision output; the runner
  allocates them zero-filled, so no TVM pass merges or re-points a tensor that crosses
  kernels (``lowering.run``);
* types follow ``lowering.types``, and half precision ``lowering.narrow``: each equation
  computes in float32 and rounds once on store; half tensors that an equation reads while
  writing them are float32 accumulators, rounded when other equations read them and
  rounded into an output after the last statement;
* every equation becomes one ``T.sblock`` (named after its output, ``_1``, ``_2`` for
  repeats) that remaps *all* enclosing loop variables, outermost first, with ``R`` for the
  equation's reduction axes and ``S`` otherwise; index expressions are written inline on
  the block variables; reads and writes are inferred by TVM;
* an equation with an implied initialisation gets ``with T.init():``; TVM runs it when
  all reduction variables are 0, which is the first update of each element under LEIR's
  sequential order;
* a reduction whose LHS index is composite (``D_{f*4+tx}`` after a split) keeps ``T.init``
  when the spatial-variables -> element map is injective (``lowering.injective``), with
  each composite entry bound to a ``T.axis.spatial(extent, f * 4 + tx)`` block variable;
  when several spatial iterations share an element (``X_{a//2}``) a separate nest over
  the spatial loops stores the identity first (``X_init``), which is exact when nothing
  else in the statement writes the tensor; other cases are a ``LoweringError``;
* nested sub-nests become nested loops under the shared outer loops;
* every conversion is an explicit ``T.Cast``; an initial value is one constant
  (``T.float16("-inf")``), never an expression TVM could hoist out of a kernel.

Loop kinds
  ``llvm``: ``L`` -> serial (consecutive ones as ``T.grid``); ``U`` -> ``T.unroll``.
  ``B`` and ``P`` -> ``T.parallel`` only when the iterations are independent (every
  tensor written under the loop is indexed by the loop variable itself, in one fixed
  dimension, by every read and write under the loop) and no enclosing loop is already
  parallel; otherwise serial. So the result is exact under LEIR's sequential semantics.
  ``V`` -> ``T.vectorized`` under the same independence test when it is the innermost loop
  over equations only (``vectorize=False`` makes it serial; ``lowering.run.build`` retries
  that way when TVM rejects the vectorised form).
  ``cuda``: the program is first planned by ``lowering.kernels`` (reductions over bound loops
  become TVM cross-thread all-reduces with their loops reordered; bound loops whose threads
  would race are made serial). ``B`` -> ``T.thread_binding`` with the tag given by the name
  prefix (``tx`` -> ``threadIdx.x``, ``by`` -> ``blockIdx.y``...); ``P`` -> serial (it is a
  CPU notion); ``U`` -> unroll; ``V`` -> vectorised as on llvm but only for extents 2 and 4.
  The outermost bound loop of a kernel without a ``blockIdx`` binding gets a one-block
  launch around it (``b_launch`` bound to ``blockIdx.x`` with extent 1), so what TVM
  allocates for an all-reduce lives inside the kernel; a statement, equation or sub-nest
  outside every kernel gets a one-block, one-thread launch, so it runs sequentially on the
  GPU. An all-reduce equation is written as the plain combiner ``X = X + (e)`` TVM
  recognises.

Shared and local intermediates (lowering.md 9.6: never at function level, where TVM 0.27
turns them into extra kernel pointer parameters)
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

import keyword
import re
from dataclasses import dataclass, field
from typing import Optional

from engine.leir.ast import DTYPES, BinOp, Call, Compare, Equation, Nest, Num, Ref, Unary, Var, walk
from engine.leir.printer import expr_to_str

from ..cudacc import compile_offline, cuda_target
from ..errors import LoweringError
from ..kernels import binding_tag, combiner, plan_cuda, reduction_axes
from ..narrow import COMPUTE, HALF, accumulators, compute_type, self_reads
from ..vecmath import VARS, exp_f32
from ..types import WEAK_FLOAT, WEAK_INT, concrete, is_float, is_int, promote, real_type

TARGETS = ("llvm", "cuda")
INDENT = "    "
_RESERVED_PY = {"range", "T", "main"}
LAUNCH_VAR = "b_launch"


def py_name(name: str) -> str:
    """A LEIR name as a Python identifier (keywords such as ``in`` or ``None`` get a ``_``)."""
    if keyword.iskeyword(name) or name in _RESERVED_PY:
        return name + "_"
    return name


def block_var(name: str) -> str:
    return "v_" + name


def tvm_dtype(code: str) -> str:
    return DTYPES[code]


# --------------------------------------------------------------------------- analysis helpers


def _items_equations(items):
    for it in items:
        if isinstance(it, Equation):
            yield it
        else:
            yield from _items_equations(it.body)


def _accesses(items):
    """(ref, is_write) for every tensor access of the equations under ``items``."""
    for eq in _items_equations(items):
        yield eq.lhs, True
        for sub in eq.lhs.index:
            for n in walk(sub):
                if isinstance(n, Ref):
                    yield n, False
        for n in walk(eq.rhs):
            if isinstance(n, Ref):
                yield n, False


def _private_dim(var: str, refs: list[Ref], taken: set[int] = frozenset()) -> Optional[int]:
    """A dimension that every ref indexes by exactly ``var`` (None if there is none)."""
    if not refs:
        return None
    rank = len(refs[0].index)
    for d in range(rank):
        if d in taken:
            continue
        if all(len(r.index) == rank and r.index[d] == Var(var) for r in refs):
            return d
    return None


def _independent(var: str, items) -> bool:
    """Iterations of loop ``var`` over ``items`` touch disjoint elements of everything written:
    every access to a written tensor indexes it by ``var`` alone in one fixed dimension, or
    every access uses one and the same index, an entry of which is affine in ``var`` with a
    nonzero coefficient (``D_{tx*4+d, a*16+f}`` after a tile: each iteration of ``f`` reads and
    writes its own element)."""
    acc = list(_accesses(items))
    written = dict.fromkeys(r.name for r, w in acc if w)
    for name in written:
        rs = [r for r, _ in acc if r.name == name]
        if _private_dim(var, rs) is None and not _owned_by_one_index(var, rs):
            return False
    return True


def _owned_by_one_index(var: str, refs_: list[Ref]) -> bool:
    """All ``refs_`` share one index tuple and one of its entries determines ``var`` (the
    others held fixed)."""
    from engine.leir.affine import radix_vars
    index = refs_[0].index
    if any(r.index != index for r in refs_):
        return False
    for entry in index:
        names = {n.name for n in walk(entry) if isinstance(n, Var)}
        if var in names and var in radix_vars(entry, dict.fromkeys(names, 2), among={var}):
            return True
    return False


def _plain_entry(e) -> bool:
    """An index entry that is a loop variable or an integer literal."""
    return isinstance(e, Var) or (isinstance(e, Num) and e.is_int)


# --------------------------------------------------------------------------- placement


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


def _place_scoped(prog, target: str):
    """Allocation sites: ({nest path: _Site}, {top stmt needing a launch}, function-level
    buffers, {name: elided dims}, {name: allocated shape})."""
    info = prog.info
    eq_paths: dict[str, list[tuple[int, ...]]] = {}
    for ei in info.equations:
        eq = ei.eq
        names = [eq.lhs.name] + [r.name for r, _ in _accesses([eq]) if r is not eq.lhs]
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
    for r, _ in _accesses(prog.body):
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
    refs = [r for r, _ in _accesses([nest]) if r.name == buf.name]
    dims: list[int] = []
    for l in enclosing:
        if target == "cuda" and scope == "shared" and l.kind == "B" and l.var.startswith("t"):
            continue  # threads of one block share the buffer: keep the dimension
        d = _private_dim(l.var, refs, set(dims))
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
            if _has_bound(top):
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
            elif any(r.name == name for r, _ in _accesses([it])):
                out.extend(v for v in loops if v not in out)

    visit(nest, [l.var for l in nest.loops[k:] if l.kind == "B"])
    return out


def _binds_block(nest: Nest) -> bool:
    """Whether a loop of ``nest`` or of a sub-nest is bound to a block index."""
    return any(l.kind == "B" and l.var.startswith("b") for l in nest.loops) or any(
        isinstance(it, Nest) and _binds_block(it) for it in nest.body)


def _has_bound(nest: Nest) -> bool:
    return any(l.kind == "B" for l in nest.loops) or any(
        isinstance(it, Nest) and _has_bound(it) for it in nest.body)


def _fresh(base: str, taken: set) -> str:
    name, j = base, 0
    while name in taken:
        j += 1
        name = f"{base}_{j}"
    taken.add(name)
    return name


# --------------------------------------------------------------------------- expressions


def _shape_text(shape) -> str:
    if not shape:
        return "()"
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(s) for s in shape) + ")"


def literal(text: str, dtype: str) -> str:
    """A LEIR literal as a TVMScript constant of ``dtype``."""
    if text == "inf":
        if is_float(dtype):
            return f'T.{dtype}("inf")'
        return f'T.max_value("{dtype}")'
    integral = text.isdigit()
    if dtype == "int32" and integral:
        return text
    if dtype == "bool":
        return "T.bool(True)" if float(text) != 0 else "T.bool(False)"
    if is_int(dtype) and not integral:
        return f'T.Cast("{dtype}", T.float64({text}))'
    return f"T.{dtype}({text})"


_INIT_TEXT = {"0": "0", "1": "1"}


def init_value(identity: str, dtype: str) -> str:
    """The identity as one constant (``T.float16("-inf")``, not a negation TVM could hoist into a
    host-side variable and pass to a kernel as a scalar argument)."""
    if identity in _INIT_TEXT:
        return literal(identity, dtype) if dtype != "int32" else identity
    if is_float(dtype):
        return f'T.{dtype}("{identity}")'
    return f'T.min_value("{dtype}")' if identity == "-inf" else f'T.max_value("{dtype}")'


# Python precedence levels of generated expressions (higher binds tighter).
_OR, _AND, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 5, 6, 9


@dataclass(frozen=True)
class _Storage:
    """Where and in which type tensors live (``lowering.narrow``): half-precision accumulators
    are stored as float32, an output accumulator under another name."""

    acc: frozenset = frozenset()
    alias: dict = field(default_factory=dict)   # output name -> its float32 accumulator buffer

    def dtype(self, name: str, declared: str) -> str:
        return COMPUTE if name in self.acc else declared

    def buffer(self, name: str) -> str:
        return py_name(self.alias.get(name, name))


class _ExprLowerer:
    """Typed translation of one equation's expressions (see ``lowering.types``): values are
    computed in ``compute_type`` of their types (half precision in float32, ``lowering.narrow``)."""

    def __init__(self, buffers, out_dtype: str, elided: dict[str, tuple[int, ...]], axes=None,
                 storage: Optional[_Storage] = None, writes: Optional[str] = None, let_vars=None):
        self.let_vars = let_vars  # () -> fresh names of vecmath.VARS (llvm: exp as vector arithmetic)
        self.buffers = buffers
        self.out = compute_type(out_dtype)
        self.elided = elided
        self.axes = axes or {}  # index expression -> the block variable bound to it
        self.var_text = block_var  # how a loop variable is written (block var, or loop var in a binding)
        self.storage = storage or _Storage()
        self.writes = writes    # the tensor the equation writes: its accumulator is read unrounded

    # -- types -------------------------------------------------------------------------------
    def ty(self, e, ctx: str) -> str:
        if isinstance(e, Num):
            return WEAK_INT if e.is_int else WEAK_FLOAT
        if isinstance(e, Var):
            if ctx != "value" or self.out == "bool":
                return "int32"
            return self.out
        if isinstance(e, Ref):
            return compute_type(tvm_dtype(self.buffers[e.name].dtype))
        if isinstance(e, Unary):
            t = self.ty(e.operand, ctx)
            return "int32" if t == "bool" else t
        if isinstance(e, BinOp):
            if e.op in ("&", "|"):
                return "bool"
            t = promote(self.ty(e.lhs, ctx), self.ty(e.rhs, ctx))
            if e.op in ("/", "**"):
                return real_type(t, self.out)
            return "int32" if t == "bool" else t
        if isinstance(e, Compare):
            return "bool"
        if isinstance(e, Call):
            f = e.func
            if f in ("exp", "log", "sqrt", "erf"):
                return real_type(self.ty(e.args[0], ctx), self.out)
            if f == "abs":
                t = self.ty(e.args[0], ctx)
                return "int32" if t == "bool" else t
            if f in ("max", "min"):
                return promote(self.ty(e.args[0], ctx), self.ty(e.args[1], ctx))
            if f == "if_then_else":
                return promote(self.ty(e.args[1], ctx), self.ty(e.args[2], ctx))
        raise LoweringError(f"cannot lower expression node {type(e).__name__}", e)

    # -- text --------------------------------------------------------------------------------
    def cast(self, text: str, have: str, want: str) -> str:
        if have == want:
            return text
        return f'T.Cast("{want}", {text})'

    def value(self, e, want: str, ctx: str = "value", need: int = 0) -> str:
        """Text computing ``e`` as a value of concrete dtype ``want``, parenthesised if it binds
        looser than Python precedence level ``need``."""
        if isinstance(e, Num):
            return literal(e.text, want)
        t = concrete(self.ty(e, ctx), self.out, ctx != "value")
        text, prec = self._bare(e, t, ctx)
        if t != want:
            return self.cast(text, t, want)
        return f"({text})" if prec < need else text

    def cond(self, e, need: int = 0) -> str:
        t = concrete(self.ty(e, "cond"), self.out, True)
        if t == "bool":
            return self.value(e, "bool", "cond", need)
        text = f"{self.value(e, t, 'cond', _ADD)} != {literal('0', t)}"
        return f"({text})" if _CMP < need else text

    def _bare(self, e, t: str, ctx: str) -> tuple[str, int]:
        """Text of ``e`` computed in its own (concrete) type ``t``, with its precedence level."""
        if isinstance(e, Var):  # block variables are int32
            return self.cast(self.var_text(e.name), "int32", t), _ATOM
        if isinstance(e, Ref):
            return self.read(e), _ATOM
        if isinstance(e, Unary):
            return f"-{self.value(e.operand, t, ctx, _UNARY)}", _UNARY
        if isinstance(e, BinOp):
            if e.op in ("&", "|"):
                word, p = ("and", _AND) if e.op == "&" else ("or", _OR)
                return f"{self.cond(e.lhs, p + 1)} {word} {self.cond(e.rhs, p + 1)}", p
            if e.op in ("+", "-", "*", "/"):
                p = _ADD if e.op in ("+", "-") else _MUL
                return f"{self.value(e.lhs, t, ctx, p)} {e.op} {self.value(e.rhs, t, ctx, p + 1)}", p
            a, b = self.value(e.lhs, t, ctx), self.value(e.rhs, t, ctx)
            if e.op == "**":
                return f"T.pow({a}, {b})", _ATOM
            if e.op == "//":
                if not is_float(t):
                    return f"T.floordiv({a}, {b})", _ATOM
                return f"T.floor({self.value(e.lhs, t, ctx, _MUL)} / {self.value(e.rhs, t, ctx, _MUL + 1)})", _ATOM
            if e.op == "%":
                if not is_float(t):
                    return f"T.floormod({a}, {b})", _ATOM
                la, lb = self.value(e.lhs, t, ctx, _ADD), self.value(e.rhs, t, ctx, _MUL + 1)
                fl = f"T.floor({self.value(e.lhs, t, ctx, _MUL)} / {lb})"
                return f"{la} - {fl} * {lb}", _ADD
        if isinstance(e, Compare):
            common = self.ty(e.operands[0], "cond")
            for o in e.operands[1:]:
                common = promote(common, self.ty(o, "cond"))
            common = concrete(common, self.out, True)
            ops = [self.value(o, common, "cond", _ADD) for o in e.operands]
            parts = [f"{ops[k]} {op} {ops[k + 1]}" for k, op in enumerate(e.ops)]
            return (parts[0], _CMP) if len(parts) == 1 else (" and ".join(parts), _AND)
        if isinstance(e, Call):
            f = e.func
            if f == "exp" and t == "float32" and self.let_vars is not None:
                return exp_f32(self.value(e.args[0], t, ctx), self.let_vars()), _ATOM
            if f in ("exp", "log", "sqrt", "erf", "abs"):
                return f"T.{f}({self.value(e.args[0], t, ctx)})", _ATOM
            if f in ("max", "min"):
                a, b = (self.value(x, t, ctx) for x in e.args)
                return f"T.{f}({a}, {b})", _ATOM
            if f == "if_then_else":
                c, a, b = self.cond(e.args[0]), self.value(e.args[1], t, ctx), self.value(e.args[2], t, ctx)
                return f"T.if_then_else({c}, {a}, {b})", _ATOM
        raise LoweringError(f"cannot lower '{type(e).__name__}' here", e)

    def read(self, r: Ref) -> str:
        """A tensor read as a value of its compute type: half precision widened, an accumulator
        rounded to its declared type unless the equation writing it reads it."""
        declared = tvm_dtype(self.buffers[r.name].dtype)
        text = self.load(r)
        if declared not in HALF:
            return text
        if self.storage.dtype(r.name, declared) == COMPUTE:
            if r.name == self.writes:
                return text
            text = f'T.Cast("{declared}", {text})'
        return f'T.Cast("{COMPUTE}", {text})'

    def load(self, r: Ref) -> str:
        """The buffer access of ``r`` (in its storage type)."""
        drop = self.elided.get(r.name, ())
        idx = []
        for d, i in enumerate(r.index):
            if d in drop:
                continue
            if i in self.axes:
                idx.append(self.axes[i])
                continue
            t = self.ty(i, "index")
            if is_float(t):
                raise LoweringError(f"index '{i}' of '{r.name}' is not an integer", r)
            idx.append(self.value(i, concrete(t, "int32", True), "index"))
        return f"{self.storage.buffer(r.name)}[{', '.join(idx) if idx else '()'}]"


# --------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Lowered:
    """Generated TVMScript and the scratch buffers its ``main`` takes after the outputs: every
    function-level intermediate, in first-use order, as (name, shape, TVM dtype). The runner
    allocates them zero-filled, like outputs, so no TVM pass can merge, re-point or reuse
    the memory of a tensor that crosses kernels."""

    text: str
    scratch: tuple = ()
    notes: tuple = ()      # CUDA: (statement, loop, why) for bound loops run serially


class _Lowerer:
    def __init__(self, prog, target: str, vectorize: bool):
        if target not in TARGETS:
            raise LoweringError(f"unknown target '{target}' (expected {' or '.join(TARGETS)})")
        self.allreduce: frozenset = frozenset()
        self.notes: tuple = ()
        if target == "cuda":
            plan = plan_cuda(prog)
            prog, self.allreduce, self.notes = plan.program, plan.allreduce, plan.serialised
        self.prog = prog
        self.target = target
        self.vectorize = vectorize
        self.info = prog.info
        self.lines: list[str] = []
        self.let_decls: list[str] = []
        self.block_names: dict[str, int] = {}
        self.eq_infos = list(self.info.equations)
        self.eq_pos = 0
        self.in_kernel = False
        self.sites, self.launches, self.func_level, self.elided, self.shapes = _place_scoped(prog, target)
        forced = frozenset(self.eq_infos[k].eq.lhs.name for k in self.allreduce)
        acc = frozenset(accumulators(prog, forced))
        outs = {d.name for d in prog.outputs}
        taken = set(self.info.buffers)
        alias = {}
        for name in sorted(acc & outs):
            alias[name] = _fresh(f"acc_{name}", taken)
        self.storage = _Storage(acc, alias)
        self.composite_inits = self._plan_composite_inits()

    def _let_vars(self) -> tuple:
        """Fresh variables for one inlined ``exp`` (``lowering.vecmath``), declared in its block."""
        k = len(self.let_decls) // len(VARS)
        names = tuple(f"_e{k}{tag}" for tag, _ in VARS)
        self.let_decls += [f"{n} = T.{dtype}()" for n, (_, dtype) in zip(names, VARS)]
        return names

    def emit(self, depth: int, text: str):
        self.lines.append(INDENT * depth + text)

    def dtype_of(self, name: str) -> str:
        """The storage type of a tensor (float32 for a half-precision accumulator)."""
        return self.storage.dtype(name, tvm_dtype(self.info.buffers[name].dtype))

    def run(self) -> Lowered:
        params = []
        for d in self.prog.inputs + self.prog.outputs:
            params.append(f'{py_name(d.name)}: T.Buffer({_shape_text(d.shape)}, "{tvm_dtype(d.dtype)}")')
        scratch = [(name, tuple(shape), self.dtype_of(name)) for name, shape, _ in self.func_level]
        scratch += [(self.storage.alias[d.name], tuple(d.shape), COMPUTE)
                    for d in self.prog.outputs if d.name in self.storage.alias]
        for name, shape, dtype in scratch:
            params.append(f'{py_name(name)}: T.Buffer({_shape_text(shape)}, "{dtype}")')
        self.emit(0, "@T.prim_func(s_tir=True)")
        self.emit(0, f"def main({', '.join(params)}):")
        self.emit(1, 'T.func_attr({"tir.noalias": True})')
        for i, nest in enumerate(self.prog.body):
            self.statement(i, nest)
        if self.eq_pos != len(self.eq_infos):
            raise LoweringError("internal: equation count differs from the program analysis")
        for d in self.prog.outputs:
            if d.name in self.storage.alias:
                self._round_out(d)
        return Lowered("\n".join(self.lines) + "\n", tuple(scratch), tuple(self.notes))

    def _alloc(self, name: str, shape, scope: str) -> str:
        extra = "" if scope == "global" else f', scope="{scope}"'
        return f'{py_name(name)} = T.alloc_buffer({_shape_text(shape)}, "{self.dtype_of(name)}"{extra})'

    def _round_out(self, d):
        """Round a half-precision output's float32 accumulator into the output, once."""
        acc, out = py_name(self.storage.alias[d.name]), tvm_dtype(d.dtype)
        shape = tuple(d.shape)
        n = 1
        for s in shape:
            n *= s
        if self.target == "cuda":
            threads = min(256, n)
            blocks = -(-n // threads)
            self.emit(1, f'for b_out in T.thread_binding({blocks}, thread="blockIdx.x"):')
            self.emit(2, f'for t_out in T.thread_binding({threads}, thread="threadIdx.x"):')
            self.emit(3, f'with T.sblock("{d.name}_round"):')
            self.emit(4, 'v_b, v_t = T.axis.remap("SS", [b_out, t_out])')
            flat = f"v_b * {threads} + v_t"
            if blocks * threads != n:
                self.emit(4, f"T.where(b_out * {threads} + t_out < {n})")
            idx, stride = [], n
            for s in shape:
                stride //= s
                idx.append(f"({flat}) // {stride} % {s}" if stride > 1 else f"({flat}) % {s}")
            depth = 4
        else:
            if shape:
                self.emit(1, f"for i_0 in T.parallel({shape[0]}):")
            if len(shape) > 1:
                self.emit(2, f"for {', '.join(f'i_{k}' for k in range(1, len(shape)))} in "
                             f"T.grid({', '.join(str(x) for x in shape[1:])}):")
            depth = 1 + min(len(shape), 2)
            self.emit(depth, f'with T.sblock("{d.name}_round"):')
            depth += 1
            if shape:
                names = [f"v_{k}" for k in range(len(shape))]
                self.emit(depth, f"{', '.join(names)} = T.axis.remap(\"{'S' * len(shape)}\", "
                                 f"[{', '.join(f'i_{k}' for k in range(len(shape)))}])")
                idx = names
            else:
                idx = []
        where = ", ".join(idx) if idx else "()"
        self.emit(depth, f'{py_name(d.name)}[{where}] = T.Cast("{out}", {acc}[{where}])')

    # -- loops -------------------------------------------------------------------------------
    def _modes(self, nest: Nest, parallel_above: bool) -> tuple[list[str], bool]:
        modes = []
        innermost_eqs = all(isinstance(it, Equation) for it in nest.body)
        for k, l in enumerate(nest.loops):
            under = [Nest(nest.loops[k + 1:], nest.body)] if k + 1 < len(nest.loops) else list(nest.body)
            if self.target == "cuda":
                if l.kind == "B":
                    modes.append("bind")
                elif l.kind == "U":
                    modes.append("unroll")
                elif (l.kind == "V" and self.vectorize and l.extent in (2, 4) and innermost_eqs
                      and k == len(nest.loops) - 1 and _independent(l.var, under)):
                    modes.append("vectorized")
                else:
                    modes.append("serial")
                continue
            if l.kind in ("B", "P") and not parallel_above and _independent(l.var, under):
                modes.append("parallel")
                parallel_above = True
            elif (l.kind == "V" and self.vectorize and innermost_eqs and k == len(nest.loops) - 1
                  and _independent(l.var, under)):
                modes.append("vectorized")
            elif l.kind == "U":
                modes.append("unroll")
            else:
                modes.append("serial")
        return modes, parallel_above

    def loops(self, depth: int, loops, modes, block_bound: bool = True) -> int:
        """Emit ``loops``; on cuda the outermost bound loop of a kernel without a ``blockIdx``
        binding (``block_bound`` False) gets a one-block launch around it, so the buffers TVM
        adds for a cross-thread reduction are allocated inside the kernel."""
        k = 0
        while k < len(loops):
            l, m = loops[k], modes[k]
            if m == "serial":
                j = k
                while j < len(loops) and modes[j] == "serial":
                    j += 1
                run = loops[k:j]
                if len(run) == 1:
                    self.emit(depth, f"for {py_name(l.var)} in range({l.extent}):")
                else:
                    self.emit(depth, f"for {', '.join(py_name(x.var) for x in run)} in "
                                     f"T.grid({', '.join(str(x.extent) for x in run)}):")
                depth += 1
                k = j
                continue
            if m == "bind":
                if not self.in_kernel and not block_bound:
                    self.emit(depth, f'for {LAUNCH_VAR} in T.thread_binding(1, thread="blockIdx.x"):')
                    depth += 1
                self.in_kernel = True
                self.emit(depth, f'for {py_name(l.var)} in T.thread_binding({l.extent}, thread="{binding_tag(l.var)}"):')
            else:
                self.emit(depth, f"for {py_name(l.var)} in T.{m}({l.extent}):")
            depth += 1
            k += 1
        return depth

    # -- reductions through a composite LHS index --------------------------------------------
    def _plan_composite_inits(self) -> dict[int, str]:
        """{equation position: "axis" | "pre"} for reductions whose LHS index is composite.

        "axis": the spatial-variables -> element map is injective, so every element has one
        spatial iteration and ``T.init`` (run when all reduction variables are 0) initialises
        it exactly before its first update; the composite entries become
        ``T.axis.spatial(extent, binding)`` block variables (lowering.md 3.3).
        "pre": several spatial iterations share an element, so ``T.init`` would reset it at
        each; instead a separate nest over the spatial loops stores the identity into every
        element the equation touches, just before its top-level statement. That is exact
        when nothing else in the statement writes the tensor (the equation is the tensor's
        first writer in the program, so before its first update an element is unwritten),
        the index reads no tensor, and the tensor is visible outside the statement.
        Anything else is a ``LoweringError``.
        """
        from ..injective import is_injective
        plan: dict[int, str] = {}
        scoped = {name for site in self.sites.values() for name, _, _ in site.buffers}
        for k, ei in enumerate(self.eq_infos):
            eq = ei.eq
            if ei.eq.init is None or all(_plain_entry(i) for i in eq.lhs.index):
                continue
            red = set(ei.reduction_axes)
            extents = {l.var: l.extent for l in ei.loops if l.var not in red}
            if is_injective(eq.lhs.index, extents):
                plan[k] = "axis"
                continue
            name = eq.lhs.name
            why = None
            if any(isinstance(n, Ref) for i in eq.lhs.index for n in walk(i)):
                why = "the index reads a tensor, so the elements it touches are only known at run time"
            elif name in scoped:
                why = f"'{name}' is allocated inside the statement, so it cannot be initialised before it"
            else:
                for other in self.eq_infos:
                    if other is not ei and other.path[0] == ei.path[0] and other.eq.lhs.name == name:
                        why = (f"another equation of the same statement also writes '{name}', so "
                               "initialising it up front would change that equation's result")
                        break
            if why is not None:
                raise LoweringError(f"reduction into '{name}' through a composite index that several "
                                    f"spatial iterations share: its implicit initialisation cannot be "
                                    f"expressed ({why})", eq.lhs)
            plan[k] = "pre"
        return plan

    def _pre_init(self, depth: int, ei):
        """A nest over ``ei``'s spatial loops storing the reduction identity (see above)."""
        eq = ei.eq
        red = set(ei.reduction_axes)
        loops = [l for l in ei.loops if l.var not in red]
        if self.target == "cuda":
            self.emit(depth, f'for {LAUNCH_VAR} in T.thread_binding(1, thread="blockIdx.x"):')
            depth += 1
        depth = self.loops(depth, loops, ["serial"] * len(loops))
        name = eq.lhs.name
        key = f"{name}_init"
        n = self.block_names.get(key, 0)
        self.block_names[key] = n + 1
        self.emit(depth, f'with T.sblock("{key}{"" if n == 0 else f"_{n}"}"):')
        depth += 1
        if loops:
            self.emit(depth, f"{', '.join(block_var(l.var) for l in loops)} = T.axis.remap("
                             f"\"{'S' * len(loops)}\", [{', '.join(py_name(l.var) for l in loops)}])")
        ex = _ExprLowerer(self.info.buffers, tvm_dtype(self.info.buffers[name].dtype), self.elided,
                          storage=self.storage, writes=name)
        self.emit(depth, f"{ex.load(eq.lhs)} = {init_value(eq.init, self.dtype_of(name))}")

    def _spatial_axes(self, depth: int, ei, taken: set[str]) -> dict:
        """Emit ``T.axis.spatial`` block variables for the composite LHS entries of ``ei``."""
        eq = ei.eq
        shape = self.info.buffers[eq.lhs.name].shape
        binder = _ExprLowerer(self.info.buffers, "int32", {})
        binder.var_text = py_name
        axes = {}
        for d, entry in enumerate(eq.lhs.index):
            if _plain_entry(entry) or entry in axes:
                continue
            base = "v_" + "_".join(re.findall(r"[A-Za-z0-9]+", expr_to_str(entry)))
            name, j = base, 0
            while name in taken:
                j += 1
                name = f"{base}_{j}"
            taken.add(name)
            axes[entry] = name
            self.emit(depth, f"{name} = T.axis.spatial({shape[d]}, {binder.value(entry, 'int32', 'index')})")
        return axes

    # -- statements --------------------------------------------------------------------------
    def statement(self, i: int, nest: Nest):
        for k, mode in self.composite_inits.items():
            if mode == "pre" and self.eq_infos[k].path[0] == i:
                self._pre_init(1, self.eq_infos[k])
        depth = 1
        self.in_kernel = False
        if i in self.launches or (self.target == "cuda" and not _has_bound(nest)):
            self.emit(depth, f'for {LAUNCH_VAR} in T.thread_binding(1, thread="blockIdx.x"):')
            depth += 1
            self.in_kernel = True
        self.nest(depth, nest, (i,), False)

    def nest(self, depth: int, nest: Nest, path: tuple[int, ...], parallel_above: bool):
        outer_kernel = self.in_kernel
        modes, par = self._modes(nest, parallel_above)
        site = self.sites.get(path)
        blocks = _binds_block(nest)
        if site is None:
            depth = self.loops(depth, nest.loops, modes, blocks)
        else:
            depth = self.loops(depth, nest.loops[:site.k], modes[:site.k], blocks)
            self.emit(depth, f'with T.sblock("alloc_{"_".join(str(j) for j in path)}"):')
            depth += 1
            inner = {name for p, s in self.sites.items() if p[:len(path)] == path for name, _, _ in s.buffers}
            reads, writes = self._regions(nest, inner)
            self.emit(depth, f"T.reads({', '.join(reads)})")
            self.emit(depth, f"T.writes({', '.join(writes)})")
            for name, shape, scope in site.buffers:
                self.emit(depth, self._alloc(name, shape, scope))
            depth = self.loops(depth, nest.loops[site.k:], modes[site.k:], blocks)
        inside = self.in_kernel
        for j, it in enumerate(nest.body):
            d = depth
            self.in_kernel = inside
            if self.target == "cuda" and not inside and (isinstance(it, Equation) or not _has_bound(it)):
                # code outside every kernel of a statement that has kernels: a one-thread launch
                self.emit(d, f'for {LAUNCH_VAR} in T.thread_binding(1, thread="blockIdx.x"):')
                d += 1
                self.in_kernel = True
            if isinstance(it, Nest):
                self.nest(d, it, path + (j,), par)
            else:
                self.equation(d, it)
        self.in_kernel = outer_kernel

    def _regions(self, nest: Nest, exclude: set[str]):
        reads, writes = {}, {}
        for r, w in _accesses([nest]):
            if r.name in exclude:
                continue
            (writes if w else reads).setdefault(r.name, None)

        def region(name):
            shape = self.shapes[name]
            if not shape:
                return f"{self.storage.buffer(name)}[()]"
            return f"{self.storage.buffer(name)}[{', '.join(f'0:{n}' for n in shape)}]"
        return [region(n) for n in reads], [region(n) for n in writes]

    def equation(self, depth: int, eq: Equation):
        ei = self.eq_infos[self.eq_pos]
        self.eq_pos += 1
        if ei.eq.lhs != eq.lhs:
            raise LoweringError("internal: equation order differs from the program analysis", eq.lhs)
        name = eq.lhs.name
        n = self.block_names.get(name, 0)
        self.block_names[name] = n + 1
        self.emit(depth, f'with T.sblock("{name}{"" if n == 0 else f"_{n}"}"):')
        depth += 1
        red = set(ei.reduction_axes)
        if self.target == "cuda":   # a one-iteration reduction loop bound to a block would make TVM
            red = reduction_axes(ei)  # attempt (and refuse) a cross-thread reduction: declare it spatial
        vars_ = [l.var for l in ei.loops]
        kinds = "".join("R" if v in red else "S" for v in vars_)
        self.emit(depth, f"{', '.join(block_var(v) for v in vars_)} = T.axis.remap(\"{kinds}\", "
                         f"[{', '.join(py_name(v) for v in vars_)}])")
        mode = self.composite_inits.get(self.eq_pos - 1)
        axes = {}
        if mode == "axis":
            axes = self._spatial_axes(depth, ei, {block_var(v) for v in vars_})
        declared = tvm_dtype(self.info.buffers[name].dtype)
        stored = self.dtype_of(name)
        lets = self._let_vars if self.target == "llvm" else None
        ex = _ExprLowerer(self.info.buffers, declared, self.elided, axes, self.storage, name, lets)
        lhs = ex.load(eq.lhs)
        first = len(self.let_decls)
        value = self._stored_value(ex, ei, lhs, declared, stored)
        for d in self.let_decls[first:]:      # the variables of the block's inlined exps
            self.emit(depth, d)
        init = None if mode == "pre" else ei.eq.init
        if init is not None:
            self.emit(depth, "with T.init():")
            self.emit(depth + 1, f"{lhs} = {init_value(init, stored)}")
        self.emit(depth, f"{lhs} = {value}")

    def _stored_value(self, ex, ei, lhs: str, declared: str, stored: str) -> str:
        """The right-hand side as stored: computed in the compute type, rounded once to the
        declared type (kept unrounded in an accumulator by the equations that read it); an
        all-reduce as the plain combiner TVM recognises."""
        eq = ei.eq
        compute = ex.out
        if self.eq_pos - 1 in self.allreduce:
            op, e = combiner(eq)
            term = ex.value(e, compute)
            if op in ("max", "min"):
                return f"T.{op}({lhs}, {term})"
            return f"{lhs} {op} ({term})"
        value = ex.value(eq.rhs, compute)
        if stored != compute:
            return ex.cast(value, compute, stored)
        if declared in HALF and not self_reads(eq):
            return f'T.Cast("{COMPUTE}", T.Cast("{declared}", {value}))'
        return value


# --------------------------------------------------------------------------- API


def lower_module(program, target: str = "llvm", vectorize: bool = True) -> Lowered:
    """The TVMScript of ``program`` for ``target`` with the scratch buffers ``main`` takes."""
    return _Lowerer(program, target, vectorize).run()


def lower_to_tvmscript(program, target: str = "llvm", vectorize: bool = True) -> str:
    """Deterministic TVMScript text of ``program`` for ``target`` ("llvm" or "cuda")."""
    return lower_module(program, target, vectorize).text


def from_tvmscript(text: str):
    """Parse generated TVMScript into a PrimFunc (``LoweringError`` if TVM rejects it)."""
    import tvm
    try:
        return tvm.script.from_source(text)
    except Exception as e:  # TVM raises DiagnosticError, TVMError, ... with long traces
        raise LoweringError(f"TVM rejected the generated TIR: {first_line(e)}", stage="build") from None


def lower(program, target: str = "llvm", vectorize: bool = True):
    """``program`` as a TVM PrimFunc (via ``tvm.script.from_source``)."""
    return from_tvmscript(lower_to_tvmscript(program, target, vectorize))


def first_line(e: BaseException) -> str:
    """The informative part of a TVM exception message (no C++ backtrace)."""
    text = str(e).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    lines = [l[len("Traceback: "):] if l.startswith("Traceback: ") else l for l in lines]
    for l in lines:
        if re.search(r"\w+Error: ", l) and not l.startswith(("File", "Traceback", "-->", "|")):
            return l[:400]
    for l in lines:
        if l.lower().startswith("error:"):
            return l[:400]
    return (lines[-1] if lines else type(e).__name__)[:400]


def pass_config(target: str) -> dict:
    """TVM pass options of a build for ``target``: no common-subexpression pass on cuda (it
    hoists constants into host variables that become kernel arguments; nvcc does its own)."""
    return {"tirx.disable_cse_tir": True} if target == "cuda" else {}


def cuda_module(program, arch: str = "sm_90"):
    """The built CUDA runtime module of ``program`` (no GPU or nvcc needed)."""
    import tvm
    f = lower(program, "cuda")
    try:
        with tvm.transform.PassContext(config=pass_config("cuda")):
            return tvm.tirx.build(f, target=cuda_target(arch))
    except Exception as e:
        raise LoweringError(f"TVM could not build the CUDA kernel: {first_line(e)}", stage="build") from None


def cuda_source(program, arch: str = "sm_90") -> str:
    """CUDA C source of ``program`` (no GPU or nvcc needed)."""
    return cuda_module(program, arch).imports[0].inspect_source()


def cuda_ptx(source: str, arch: str = "sm_90") -> str:
    """Compile CUDA source to PTX with nvcc (needs ``nvcc`` on PATH)."""
    return compile_offline(source, arch, "ptx").decode()
