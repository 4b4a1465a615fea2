"""Static checks of the CUDA code TVM makes from a program: no GPU, no nvcc.

They read the module after TVM's default pipeline (host and device functions split, buffers
flattened; what ``tvm.tirx.build`` hands to code generation) and look for the classes of wrong
code a real GPU showed (issue 14):

* ``host-allocation``: the host allocates device memory for the kernels (an intermediate, or
  a buffer TVM added). Such buffers are TVM's to merge and reuse: a kernel then reads a
  tensor under another buffer's name. The lowering passes every intermediate as a
  runner-allocated argument, so there must be none;
* ``aliased-argument``: one launch passes the same memory to two parameters of a kernel
  (``main_kernel_1(float* E_ptr, float* E_ptr_1)`` after storage reuse), which the kernel
  declares ``__restrict__``: what it writes through one it may never see through the other;
* ``scoped-argument``: a kernel parameter points to ``shared`` or ``local`` memory, i.e.
  memory meant per block or per thread was allocated once by the host and is shared by all;
* ``thread-race``: a kernel stores to memory visible to several threads at an element that
  does not depend on a thread index of extent above 1 (and no guard such as
  ``threadIdx.x == 0`` pins that index), reading the element back (a reduction over threads
  without a cross-thread reduction) or storing a value that depends on the missing index;
* ``half-argument``: a kernel takes a 16-bit scalar, which the CUDA runtime cannot pass
  ("Cannot handle float16 as device function argument").

``check_program(p)`` lowers and checks one program; ``check_module(mod)`` checks any lowered
module, so the same checks can be run on TIR from elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

CHECKS = ("host-allocation", "aliased-argument", "scoped-argument", "thread-race", "half-argument")
_SIXTEEN = ("float16", "bfloat16", "int16", "uint16")
_CHILDREN = ("seq", "body", "then_case", "else_case", "condition", "value", "indices", "args",
             "a", "b", "true_value", "false_value", "min", "extent", "base", "stride", "vectors")


@dataclass(frozen=True)
class Finding:
    check: str       # one of CHECKS
    function: str    # the kernel (or host function) it is in
    message: str

    def __str__(self) -> str:
        return f"{self.check} in {self.function}: {self.message}"


# --------------------------------------------------------------------------- TIR walking


def _key(node) -> int:
    return node.__chandle__()


def _kind(node) -> str:
    return type(node).__name__


def _kids(node):
    for a in _CHILDREN:
        try:
            c = getattr(node, a)
        except Exception:
            continue
        if c is None or isinstance(c, (int, float, str)):
            continue
        if isinstance(c, (list, tuple)) or type(c).__name__ == "Array":
            yield from (x for x in c if hasattr(x, "same_as"))
        elif hasattr(c, "same_as"):
            yield c


def _walk(node):
    yield node
    for c in _kids(node):
        yield from _walk(c)


def _vars(expr, lets: dict) -> set[int]:
    """Keys of the variables ``expr`` depends on (through let-bound variables too)."""
    out: set[int] = set()
    for n in _walk(expr):
        if _kind(n) == "Var":
            k = _key(n)
            out.add(k)
            out |= lets.get(k, set())
    return out


def _buffer_data_arg(expr):
    """The buffer variable of a ``buffer_data(X)`` call in ``expr``, if any."""
    for n in _walk(expr):
        if _kind(n) == "Call" and getattr(n.op, "name", "") == "tirx.buffer_data" and n.args:
            return n.args[0]
    return None


# --------------------------------------------------------------------------- host side


def _host_findings(name, fn, kernels: dict) -> list[Finding]:
    found: list[Finding] = []
    root: dict[int, int] = {}      # buffer var -> the buffer var owning its memory
    names: dict[int, str] = {}
    for n in _walk(fn.body):
        k = _kind(n)
        if k == "AllocBuffer":
            b = n.buffer
            root[_key(b)] = _key(b)
            names[_key(b)] = b.name
            scope = b.scope() if callable(getattr(b, "scope", None)) else getattr(b, "scope", "global")
            found.append(Finding("host-allocation", name, f"the host allocates buffer '{b.name}' "
                                 f"(scope {scope}) for the kernels; TVM may merge or re-point it"))
        elif k == "DeclBuffer":
            b = n.buffer
            src = _buffer_data_arg(n.data) if getattr(n, "data", None) is not None else None
            root[_key(b)] = root.get(_key(src), _key(src)) if src is not None else _key(b)
            names.setdefault(root[_key(b)], b.name)
        elif k == "Evaluate" and _kind(n.value) == "Call" and \
                getattr(n.value.op, "name", "") == "tirx.call_ffi_kernel":
            call = n.value
            kname = call.args[0].value
            params = kernels.get(kname)
            seen: dict[int, list] = {}
            for i, a in enumerate(call.args[1:]):
                src = _buffer_data_arg(a) if _kind(a) == "Call" else None
                if src is None:
                    continue
                r = root.get(_key(src), _key(src))
                pname = params[i].name if params is not None and i < len(params) else "?"
                seen.setdefault(r, []).append(f"#{i + 1} ({pname})")
            for r, ps in seen.items():
                if len(ps) > 1:
                    found.append(Finding("aliased-argument", kname, f"buffer '{names.get(r, '?')}' is passed "
                                         f"as parameters {' and '.join(ps)}: the kernel reads it under one "
                                         "name and writes it under another"))
    return found


# --------------------------------------------------------------------------- device side


def _thread_vars(fn) -> dict[int, tuple[str, int]]:
    """{var key: (thread tag, extent)} of the launch dimensions of a kernel."""
    out: dict[int, tuple[str, int]] = {}
    for n in _walk(fn.body):
        if _kind(n) == "AttrStmt" and n.attr_key == "thread_extent":
            iv = n.node
            ext = n.value
            extent = int(ext.value) if _kind(ext) == "IntImm" else 1 << 30
            out[_key(iv.var)] = (str(iv.thread_tag), extent)
    return out


def _pinned(cond, threads: dict, lets: dict) -> set[int]:
    """Thread variables a condition fixes to one value (``tx == 0``, conjunctions of those)."""
    k = _kind(cond)
    if k == "And":
        return _pinned(cond.a, threads, lets) | _pinned(cond.b, threads, lets)
    if k == "EQ":
        for x, y in ((cond.a, cond.b), (cond.b, cond.a)):
            if _kind(x) == "Var" and _key(x) in threads and not _vars(y, lets) & set(threads):
                return {_key(x)}
    return set()


def _device_findings(name, fn) -> list[Finding]:
    found: list[Finding] = []
    for p in fn.params:
        ty = p.ty
        if _kind(ty) == "PointerType":
            scope = str(ty.storage_scope)
            if scope and scope not in ("global", ""):
                found.append(Finding("scoped-argument", name, f"parameter '{p.name}' points to {scope} "
                                     "memory allocated by the host and shared by every thread"))
        else:
            dt = str(getattr(ty, "dtype", ""))
            if dt in _SIXTEEN:
                found.append(Finding("half-argument", name, f"scalar parameter '{p.name}' has type {dt}; "
                                     "CUDA kernels cannot take 16-bit scalar arguments"))
    threads = _thread_vars(fn)
    params = {_key(p) for p in fn.params}
    memory: dict[int, str] = {}    # buffer var -> "global" (reachable by all) | "shared" | "local"
    lets: dict[int, set] = {}

    def visit(n, pinned: frozenset):
        k = _kind(n)
        if k in ("Bind", "LetStmt"):
            lets[_key(n.var)] = _vars(n.value, lets)
        elif k == "DeclBuffer":
            data = getattr(n, "data", None)
            src = _buffer_data_arg(data) if data is not None else None
            if src is not None and _key(src) in memory:
                memory[_key(n.buffer)] = memory[_key(src)]
            elif data is not None and _vars(data, {}) & params:
                memory[_key(n.buffer)] = "global"
            else:
                memory[_key(n.buffer)] = "global"
        elif k == "AllocBuffer":
            b = n.buffer
            scope = b.scope() if callable(getattr(b, "scope", None)) else str(getattr(b, "scope", "local"))
            memory[_key(b)] = "shared" if str(scope).startswith("shared") else (
                "global" if str(scope) == "global" else "local")
        elif k == "BufferStore":
            _store(n, pinned)
        if k == "IfThenElse":
            visit(n.then_case, pinned | _pinned(n.condition, threads, lets))
            if n.else_case is not None:
                visit(n.else_case, pinned)
            return
        for c in _kids(n):
            if _kind(c) in _STMTS:
                visit(c, pinned)

    def _store(n, pinned):
        mem = memory.get(_key(n.buffer), "global")
        if mem == "local":
            return
        relevant = {v for v, (tag, ext) in threads.items()
                    if ext > 1 and (mem == "global" or tag.startswith("threadIdx"))}
        used = set()
        for i in n.indices:
            used |= _vars(i, lets)
        missing = relevant - used - pinned
        if not missing:
            return
        value_vars = _vars(n.value, lets)
        rmw = any(_kind(x) == "TensorLoad" and x.source.same_as(n.buffer) for x in _walk(n.value))
        if rmw or value_vars & missing:
            tags = ", ".join(sorted(threads[v][0] for v in missing))
            what = ("updates the same element of '{}' (a reduction over threads without a cross-thread "
                    "reduction)" if rmw else "stores a different value into the same element of '{}'")
            found.append(Finding("thread-race", name, f"every thread along {tags} " + what.format(n.buffer.name)))

    visit(fn.body, frozenset())
    return found


_STMTS = ("SeqStmt", "For", "While", "AttrStmt", "IfThenElse", "LetStmt", "Bind", "BufferStore",
          "Evaluate", "DeclBuffer", "AllocBuffer", "AssertStmt")


# --------------------------------------------------------------------------- entry points


def check_module(mod) -> list[Finding]:
    """Findings in a module after TVM's default pipeline (host and device functions)."""
    kernels, host = {}, []
    for gv, fn in mod.functions.items():
        cc = fn.attrs.get("calling_conv") if fn.attrs is not None else None
        if cc is not None and int(cc) == 2:
            kernels[gv.name_hint] = fn
        else:
            host.append((gv.name_hint, fn))
    found: list[Finding] = []
    params = {k: list(fn.params) for k, fn in kernels.items()}
    for name, fn in host:
        found += _host_findings(name, fn, params)
    for name, fn in sorted(kernels.items()):
        found += _device_findings(name, fn)
    return found


def pipeline_module(func, arch: str = "sm_90", config: dict | None = None):
    """A lowered PrimFunc after TVM's default CUDA pipeline, before code generation."""
    import tvm

    from .cudacc import cuda_target
    from .tir import pass_config
    mod = tvm.IRModule.from_expr(func) if not isinstance(func, tvm.IRModule) else func
    mod = tvm.tirx.transform.BindTarget(cuda_target(arch))(mod)
    pipeline, _, _ = tvm.tirx.get_tir_pipeline("default")
    with tvm.transform.PassContext(config=pass_config("cuda") if config is None else config):
        return pipeline(mod)


def check_program(program, arch: str = "sm_90") -> list[Finding]:
    """Lower ``program`` for cuda and check what TVM makes of it."""
    from .tir import lower
    return check_module(pipeline_module(lower(program, "cuda"), arch))


def check_tvmscript(text: str, arch: str = "sm_90", config: dict | None = None) -> list[Finding]:
    """Check TVMScript text (e.g. another version's lowering) under the given pass options."""
    from .tir import from_tvmscript
    return check_module(pipeline_module(from_tvmscript(text), arch, config))
