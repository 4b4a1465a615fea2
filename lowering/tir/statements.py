"""The program's statements as TVMScript: one ``main``, its loops, blocks and stores, written as a
``lowering.tir.script`` (rendered to text only when asked: ``Lowered.text``).

Loop kinds
  ``llvm``: ``L`` -> serial (consecutive ones as ``T.grid``); ``U`` -> ``T.unroll``.
  ``B`` and ``P`` -> ``T.parallel`` only when the iterations are independent (every
  tensor written under the loop is indexed by the loop variable itself, in one fixed
  dimension, by every read and write under the loop) and no enclosing loop is already
  parallel; otherwise serial. So the result is exact under LEIR's sequential semantics.
  ``V`` -> ``T.vectorized`` under the same independence test when it is the innermost loop
  over equations only (``vectorize=False`` makes it serial; ``lowering.run.build`` retries
  that way when TVM rejects the vectorised form).
  ``cuda``: the program is first planned by ``lowering.cuda_plan`` (reductions over bound loops
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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from engine.leir.ast import Equation, Nest, Ref, walk
from engine.leir.printer import expr_to_str

from ..errors import LoweringError
from ..cuda_plan import binding_tag, combiner, plan_cuda, reduction_axes
from ..narrow import COMPUTE, HALF, accumulators, self_reads
from ..vecmath import VARS
from .access import accesses, independent, plain_entry
from .expressions import ExprLowerer, Storage, init_value
from .names import LAUNCH_VAR, TARGETS, block_var, py_name, tvm_dtype
from .placement import binds_block, has_bound, place_scoped
from .script import (Assign, Bin, Call, Const, DictOf, Eval, For, Func, Index, ListOf, Name, Paren, Slice, Store,
                     T, TupleOf, With, name_nodes, num, render, string)


def _shape(shape) -> TupleOf:
    return TupleOf(tuple(num(s) for s in shape))


def _launch() -> For:
    """The one-block launch: ``for b_launch in T.thread_binding(1, thread="blockIdx.x"):``."""
    return For((LAUNCH_VAR,), T("thread_binding", num(1), thread=string("blockIdx.x")))


def _fresh(base: str, taken: set) -> str:
    name, j = base, 0
    while name in taken:
        j += 1
        name = f"{base}_{j}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class Lowered:
    """Generated TVMScript (``script``; its text ``text``, rendered when first asked) and the
    scratch buffers its ``main`` takes after the outputs: every function-level intermediate, in
    first-use order, as (name, shape, TVM dtype). The runner allocates them zero-filled, like
    outputs, so no TVM pass can merge, re-point or reuse the memory of a tensor that crosses
    kernels. ``lowering.tir.prim_func`` builds the PrimFunc from ``script`` without the text."""

    script: tuple          # (depth, statement) pairs of lowering.tir.script
    scratch: tuple = ()
    notes: tuple = ()      # CUDA: (statement, loop, why) for bound loops run serially

    @cached_property
    def text(self) -> str:
        return render(self.script)

    @property
    def vectorized(self) -> bool:
        """Whether a loop is ``T.vectorized`` (``vectorize=False`` would lower it differently)."""
        return any(isinstance(s, For) and s.iter.fn == "T.vectorized" for _, s in self.script)


class Lowerer:
    """One program's TVMScript for one target, built statement by statement (``run``)."""

    def __init__(self, prog, target: str, vectorize: bool, vector_exp: bool = True):
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
        self.vector_exp = vector_exp
        self.info = prog.info
        self.lines: list[tuple] = []      # (depth, statement)
        self.let_decls: list[Assign] = []
        self.block_names: dict[str, int] = {}
        self.eq_infos = list(self.info.equations)
        self.eq_pos = 0
        self.in_kernel = False
        self.sites, self.launches, self.func_level, self.elided, self.shapes = place_scoped(prog, target)
        forced = frozenset(self.eq_infos[k].eq.lhs.name for k in self.allreduce)
        acc = frozenset(accumulators(prog, forced))
        outs = {d.name for d in prog.outputs}
        taken = set(self.info.buffers)
        alias = {}
        for name in sorted(acc & outs):
            alias[name] = _fresh(f"acc_{name}", taken)
        self.storage = Storage(acc, alias)
        self.composite_inits = self._plan_composite_inits()

    def _let_vars(self) -> tuple:
        """Fresh variables for one inlined ``exp`` (``lowering.vecmath``), declared in its block."""
        k = len(self.let_decls) // len(VARS)
        names = tuple(f"_e{k}{tag}" for tag, _ in VARS)
        self.let_decls += [Assign((n,), T(dtype)) for n, (_, dtype) in zip(names, VARS)]
        return names

    def emit(self, depth: int, stmt):
        self.lines.append((depth, stmt))

    def dtype_of(self, name: str) -> str:
        """The storage type of a tensor (float32 for a half-precision accumulator)."""
        return self.storage.dtype(name, tvm_dtype(self.info.buffers[name].dtype))

    def run(self) -> Lowered:
        params = []
        for d in self.prog.inputs + self.prog.outputs:
            params.append((py_name(d.name), T("Buffer", _shape(d.shape), string(tvm_dtype(d.dtype)))))
        scratch = [(name, tuple(shape), self.dtype_of(name)) for name, shape, _ in self.func_level]
        scratch += [(self.storage.alias[d.name], tuple(d.shape), COMPUTE)
                    for d in self.prog.outputs if d.name in self.storage.alias]
        for name, shape, dtype in scratch:
            params.append((py_name(name), T("Buffer", _shape(shape), string(dtype))))
        self.emit(0, Func(tuple(params)))
        self.emit(1, Eval(T("func_attr", DictOf(((string("tir.noalias"), Const("True", True)),)))))
        for i, nest in enumerate(self.prog.body):
            self.statement(i, nest)
        if self.eq_pos != len(self.eq_infos):
            raise LoweringError("internal: equation count differs from the program analysis")
        for d in self.prog.outputs:
            if d.name in self.storage.alias:
                self._round_out(d)
        return Lowered(tuple(self.lines), tuple(scratch), tuple(self.notes))

    def _alloc(self, name: str, shape, scope: str) -> Assign:
        extra = {} if scope == "global" else {"scope": string(scope)}
        return Assign((py_name(name),), T("alloc_buffer", _shape(shape), string(self.dtype_of(name)), **extra))

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
            self.emit(1, For(("b_out",), T("thread_binding", num(blocks), thread=string("blockIdx.x"))))
            self.emit(2, For(("t_out",), T("thread_binding", num(threads), thread=string("threadIdx.x"))))
            self.emit(3, With(T("sblock", string(f"{d.name}_round"))))
            self.emit(4, Assign(("v_b", "v_t"), T("axis.remap", string("SS"), ListOf(name_nodes(("b_out", "t_out"))))))
            flat = Paren(Bin("+", Bin("*", Name("v_b"), num(threads)), Name("v_t")))
            if blocks * threads != n:
                self.emit(4, Eval(T("where", Bin("<", Bin("+", Bin("*", Name("b_out"), num(threads)), Name("t_out")),
                                                  num(n)))))
            idx, stride = [], n
            for s in shape:
                stride //= s
                idx.append(Bin("%", Bin("//", flat, num(stride)), num(s)) if stride > 1 else Bin("%", flat, num(s)))
            depth = 4
        else:
            if shape:
                self.emit(1, For(("i_0",), T("parallel", num(shape[0]))))
            if len(shape) > 1:
                self.emit(2, For(tuple(f"i_{k}" for k in range(1, len(shape))), T("grid", *map(num, shape[1:]))))
            depth = 1 + min(len(shape), 2)
            self.emit(depth, With(T("sblock", string(f"{d.name}_round"))))
            depth += 1
            if shape:
                axes = tuple(f"v_{k}" for k in range(len(shape)))
                self.emit(depth, Assign(axes, T("axis.remap", string("S" * len(shape)),
                                                ListOf(name_nodes(f"i_{k}" for k in range(len(shape)))))))
                idx = name_nodes(axes)
            else:
                idx = []
        idx = tuple(idx)
        self.emit(depth, Store(Index(Name(py_name(d.name)), idx), T("Cast", string(out), Index(Name(acc), idx))))

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
                      and k == len(nest.loops) - 1 and independent(l.var, under)):
                    modes.append("vectorized")
                else:
                    modes.append("serial")
                continue
            if l.kind in ("B", "P") and not parallel_above and independent(l.var, under):
                modes.append("parallel")
                parallel_above = True
            elif (l.kind == "V" and self.vectorize and innermost_eqs and k == len(nest.loops) - 1
                  and independent(l.var, under)):
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
                    self.emit(depth, For((py_name(l.var),), Call("range", (num(l.extent),))))
                else:
                    self.emit(depth, For(tuple(py_name(x.var) for x in run), T("grid", *(num(x.extent) for x in run))))
                depth += 1
                k = j
                continue
            if m == "bind":
                if not self.in_kernel and not block_bound:
                    self.emit(depth, _launch())
                    depth += 1
                self.in_kernel = True
                self.emit(depth, For((py_name(l.var),), T("thread_binding", num(l.extent),
                                                          thread=string(binding_tag(l.var)))))
            else:
                self.emit(depth, For((py_name(l.var),), T(m, num(l.extent))))
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
            if ei.eq.init is None or all(plain_entry(i) for i in eq.lhs.index):
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
            self.emit(depth, _launch())
            depth += 1
        depth = self.loops(depth, loops, ["serial"] * len(loops))
        name = eq.lhs.name
        key = f"{name}_init"
        n = self.block_names.get(key, 0)
        self.block_names[key] = n + 1
        self.emit(depth, With(T("sblock", string(f'{key}{"" if n == 0 else f"_{n}"}'))))
        depth += 1
        if loops:
            self.emit(depth, Assign(tuple(block_var(l.var) for l in loops),
                                    T("axis.remap", string("S" * len(loops)), ListOf(name_nodes(py_name(l.var) for l in loops)))))
        ex = ExprLowerer(self.info.buffers, tvm_dtype(self.info.buffers[name].dtype), self.elided,
                          storage=self.storage, writes=name)
        self.emit(depth, Store(ex.load(eq.lhs), init_value(eq.init, self.dtype_of(name))))

    def _spatial_axes(self, depth: int, ei, taken: set[str]) -> dict:
        """Emit ``T.axis.spatial`` block variables for the composite LHS entries of ``ei``."""
        eq = ei.eq
        shape = self.info.buffers[eq.lhs.name].shape
        binder = ExprLowerer(self.info.buffers, "int32", {})
        binder.var_text = py_name
        axes = {}
        for d, entry in enumerate(eq.lhs.index):
            if plain_entry(entry) or entry in axes:
                continue
            base = "v_" + "_".join(re.findall(r"[A-Za-z0-9]+", expr_to_str(entry)))
            name, j = base, 0
            while name in taken:
                j += 1
                name = f"{base}_{j}"
            taken.add(name)
            axes[entry] = name
            self.emit(depth, Assign((name,), T("axis.spatial", num(shape[d]), binder.value(entry, "int32", "index"))))
        return axes

    # -- statements --------------------------------------------------------------------------
    def statement(self, i: int, nest: Nest):
        for k, mode in self.composite_inits.items():
            if mode == "pre" and self.eq_infos[k].path[0] == i:
                self._pre_init(1, self.eq_infos[k])
        depth = 1
        self.in_kernel = False
        if i in self.launches or (self.target == "cuda" and not has_bound(nest)):
            self.emit(depth, _launch())
            depth += 1
            self.in_kernel = True
        self.nest(depth, nest, (i,), False)

    def nest(self, depth: int, nest: Nest, path: tuple[int, ...], parallel_above: bool):
        outer_kernel = self.in_kernel
        modes, par = self._modes(nest, parallel_above)
        site = self.sites.get(path)
        blocks = binds_block(nest)
        if site is None:
            depth = self.loops(depth, nest.loops, modes, blocks)
        else:
            depth = self.loops(depth, nest.loops[:site.k], modes[:site.k], blocks)
            self.emit(depth, With(T("sblock", string(f'alloc_{"_".join(str(j) for j in path)}'))))
            depth += 1
            inner = {name for p, s in self.sites.items() if p[:len(path)] == path for name, _, _ in s.buffers}
            reads, writes = self._regions(nest, inner)
            self.emit(depth, Eval(T("reads", *reads)))
            self.emit(depth, Eval(T("writes", *writes)))
            for name, shape, scope in site.buffers:
                self.emit(depth, self._alloc(name, shape, scope))
            depth = self.loops(depth, nest.loops[site.k:], modes[site.k:], blocks)
        inside = self.in_kernel
        for j, it in enumerate(nest.body):
            d = depth
            self.in_kernel = inside
            if self.target == "cuda" and not inside and (isinstance(it, Equation) or not has_bound(it)):
                # code outside every kernel of a statement that has kernels: a one-thread launch
                self.emit(d, _launch())
                d += 1
                self.in_kernel = True
            if isinstance(it, Nest):
                self.nest(d, it, path + (j,), par)
            else:
                self.equation(d, it)
        self.in_kernel = outer_kernel

    def _regions(self, nest: Nest, exclude: set[str]):
        reads, writes = {}, {}
        for r, w in accesses([nest]):
            if r.name in exclude:
                continue
            (writes if w else reads).setdefault(r.name, None)

        def region(name):
            return Index(Name(self.storage.buffer(name)), tuple(Slice(num(0), num(n)) for n in self.shapes[name]))
        return [region(n) for n in reads], [region(n) for n in writes]

    def equation(self, depth: int, eq: Equation):
        ei = self.eq_infos[self.eq_pos]
        self.eq_pos += 1
        if ei.eq.lhs != eq.lhs:
            raise LoweringError("internal: equation order differs from the program analysis", eq.lhs)
        name = eq.lhs.name
        n = self.block_names.get(name, 0)
        self.block_names[name] = n + 1
        self.emit(depth, With(T("sblock", string(f'{name}{"" if n == 0 else f"_{n}"}'))))
        depth += 1
        red = set(ei.reduction_axes)
        if self.target == "cuda":   # a one-iteration reduction loop bound to a block would make TVM
            red = reduction_axes(ei)  # attempt (and refuse) a cross-thread reduction: declare it spatial
        vars_ = [l.var for l in ei.loops]
        kinds = "".join("R" if v in red else "S" for v in vars_)
        self.emit(depth, Assign(tuple(block_var(v) for v in vars_),
                                T("axis.remap", string(kinds), ListOf(name_nodes(py_name(v) for v in vars_)))))
        mode = self.composite_inits.get(self.eq_pos - 1)
        axes = {}
        if mode == "axis":
            axes = self._spatial_axes(depth, ei, {block_var(v) for v in vars_})
        declared = tvm_dtype(self.info.buffers[name].dtype)
        stored = self.dtype_of(name)
        lets = self._let_vars if self.target == "llvm" and self.vector_exp else None
        ex = ExprLowerer(self.info.buffers, declared, self.elided, axes, self.storage, name, lets)
        lhs = ex.load(eq.lhs)
        first = len(self.let_decls)
        value = self._stored_value(ex, ei, lhs, declared, stored)
        for d in self.let_decls[first:]:      # the variables of the block's inlined exps
            self.emit(depth, d)
        init = None if mode == "pre" else ei.eq.init
        if init is not None:
            self.emit(depth, With(T("init")))
            self.emit(depth + 1, Store(lhs, init_value(init, stored)))
        self.emit(depth, Store(lhs, value))

    def _stored_value(self, ex, ei, lhs: Index, declared: str, stored: str):
        """The right-hand side as stored: computed in the compute type, rounded once to the
        declared type (kept unrounded in an accumulator by the equations that read it); an
        all-reduce as the plain combiner TVM recognises."""
        eq = ei.eq
        compute = ex.out
        if self.eq_pos - 1 in self.allreduce:
            op, e = combiner(eq)
            term = ex.value(e, compute)
            if op in ("max", "min"):
                return T(op, lhs, term)
            return Bin(op, lhs, Paren(term))
        value = ex.value(eq.rhs, compute)
        if stored != compute:
            return ex.cast(value, compute, stored)
        if declared in HALF and not self_reads(eq):
            return T("Cast", string(COMPUTE), T("Cast", string(declared), value))
        return value
