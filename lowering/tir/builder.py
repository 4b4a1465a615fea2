"""A ``lowering.tir.script`` as a TVM PrimFunc, built through ``tvm.script.ir_builder`` without text.

Parsing the text costs most of a candidate's lowering (TVM's parser compiles and evaluates every
expression of the AST with Python's ``eval``). This builder makes the same calls the parser makes
for each construct the script holds, in the same order: the functions of TVMScript's ``T``
namespace, operators through the parser's own operator table (``_eval_op``: comparisons and
``and``/``or`` build their nodes directly, arithmetic goes through TVM's operator overloads), and
every name bound with ``IRBuilder.name`` as the parser binds it. So the result is structurally
equal to ``from_tvmscript(render(script))`` (tests/test_direct_tir.py checks it on every example,
the corpus and their rewrites, on llvm and cuda), and it passes the same well-formedness check."""
from __future__ import annotations

import ast
import re
from functools import lru_cache

import tvm
from tvm.script.ir_builder import IRBuilder
from tvm.script.parser import tirx as T_NS
from tvm.script.parser.core import doc
from tvm.script.parser.core.evaluator import _eval_op
from tvm.tirx import is_buffer_var
from tvm.tirx.script import builder as TB

from ..errors import LoweringError
from .script import (Assign, Bin, Call, Const, DictOf, Eval, ExpF32, For, Func, Index, ListOf, Name, Neg, Number,
                     Paren, Slice, Store, TupleOf, With)

_OPS = {"+": doc.Add, "-": doc.Sub, "*": doc.Mult, "/": doc.Div, "//": doc.FloorDiv, "%": doc.Mod,
        "<": doc.Lt, "<=": doc.LtE, ">": doc.Gt, ">=": doc.GtE, "==": doc.Eq, "!=": doc.NotEq}
_BOOL = {"and": doc.And, "or": doc.Or}
_INT = re.compile(r"[0-9]+")


def _number(src: str):
    """A numeric literal as Python reads it (an integer with a leading zero is no Python literal)."""
    if _INT.fullmatch(src):
        if len(src) > 1 and src[0] == "0" and src.strip("0"):
            raise SyntaxError(f"leading zeros in decimal integer literals are not permitted: {src}")
        return int(src)
    return float(src)


@lru_cache(maxsize=None)
def _resolve(fn: str):
    obj = T_NS
    for part in fn.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _bool_op(op: str, lhs, rhs_node, env):
    """Python's ``and``/``or`` as the parser evaluates it: a Python bool short-circuits."""
    if isinstance(lhs, bool) and (lhs if op == "or" else not lhs):
        return lhs
    return _eval_op(_BOOL[op](), [lhs, ev(rhs_node, env)])


def _call(n: Call, env):
    if n.fn == "range":
        raise LoweringError("internal: range() outside a for statement")
    return _resolve(n.fn)(*(ev(a, env) for a in n.args), **{k: ev(v, env) for k, v in n.kwargs})


def _index(n: Index, env):
    base = ev(n.base, env)
    idx = [ev(i, env) for i in n.index]
    return base[idx[0]] if len(idx) == 1 else base[tuple(idx)]


def _exp(n: ExpF32, env):
    template, arg, names = _exp_template()
    inner = dict(env)
    inner[arg] = ev(n.arg, env)
    for placeholder, name in zip(names, n.names):
        inner[placeholder] = env[name]
    return ev(template, inner)


_EXPR = {
    Const: lambda n, env: n.value,
    Number: lambda n, env: _number(n.src),
    Name: lambda n, env: env[n.id],
    Call: _call,
    Bin: lambda n, env: (_bool_op(n.op, ev(n.lhs, env), n.rhs, env) if n.op in _BOOL
                         else _eval_op(_OPS[n.op](), [ev(n.lhs, env), ev(n.rhs, env)])),
    Neg: lambda n, env: _eval_op(doc.USub(), [ev(n.operand, env)]),
    Paren: lambda n, env: ev(n.inner, env),
    Index: _index,
    Slice: lambda n, env: slice(ev(n.lo, env), ev(n.hi, env), None),
    ListOf: lambda n, env: [ev(i, env) for i in n.items],
    TupleOf: lambda n, env: tuple(ev(i, env) for i in n.items),
    DictOf: lambda n, env: {ev(k, env): ev(v, env) for k, v in n.items},
    ExpF32: _exp,
}


def ev(node, env):
    """The value of an expression node, as the parser evaluates its text."""
    return _EXPR[type(node)](node, env)


# -- lowering.vecmath's exp: its text read once into a template ----------------------------------

@lru_cache(maxsize=None)
def _exp_template():
    """(tree, argument placeholder, variable placeholders) of ``vecmath.exp_f32``: the one place
    its arithmetic is written stays the one source; its text is read once per process."""
    from ..vecmath import VARS, exp_f32
    names = tuple(f"__exp_{tag}" for tag, _ in VARS)
    text = exp_f32("__exp_arg", names)
    return _from_python(ast.parse(text, mode="eval").body), "__exp_arg", names


_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def _from_python(e):
    """A Python expression of the ``T`` namespace as script nodes (the constructs exp_f32 writes)."""
    if isinstance(e, ast.Constant):
        return Const(repr(e.value), e.value)
    if isinstance(e, ast.Name):
        return Name(e.id)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return Neg(_from_python(e.operand))
    if isinstance(e, ast.BinOp) and type(e.op) in _AST_OPS:
        return Bin(_AST_OPS[type(e.op)], _from_python(e.left), _from_python(e.right))
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _AST_OPS:
        return Bin(_AST_OPS[type(e.ops[0])], _from_python(e.left), _from_python(e.comparators[0]))
    if isinstance(e, ast.Dict):
        return DictOf(tuple((_from_python(k), _from_python(v)) for k, v in zip(e.keys, e.values)))
    if isinstance(e, ast.Call):
        fn, f = [], e.func
        while isinstance(f, ast.Attribute):
            fn.append(f.attr)
            f = f.value
        if isinstance(f, ast.Name) and f.id == "T":
            return Call(".".join(["T", *reversed(fn)]), tuple(_from_python(a) for a in e.args),
                        tuple((k.arg, _from_python(k.value)) for k in e.keywords))
    raise LoweringError(f"internal: lowering.vecmath wrote '{ast.unparse(e)}', which the builder does not read")


# -- statements -----------------------------------------------------------------------------------

def _bind(name: str, value, env):
    """Bind ``name`` as the parser's assignment does for the values a script assigns: a new
    variable or buffer gets the name."""
    if not (is_buffer_var(value) or isinstance(value, tvm.ir.Var)):
        raise LoweringError(f"internal: cannot bind '{name}' to a {type(value).__name__}")
    IRBuilder.name(name, value)
    env[name] = value


def _bind_all(targets, value, env):
    if not targets:
        raise LoweringError("internal: an assignment without targets")
    values = [value] if len(targets) == 1 else list(value)
    if len(values) != len(targets):
        raise LoweringError(f"internal: {len(targets)} names for {len(values)} values")
    for t, v in zip(targets, values):
        _bind(t, v, env)


def _func(s: Func, script, i, j, env):
    with TB.prim_func(is_private=False, s_tir=True, persistent=False):
        TB.func_name("main")
        env = dict(env)
        for name, ann in s.params:
            env[name] = TB.arg(name, ev(ann, env))
        _body(script, i, j, env)


def _for(s: For, script, i, j, env):
    it = s.iter
    if it.fn == "range":
        frame = TB.serial(0, *(ev(a, env) for a in it.args))
    else:
        frame = ev(it, env)
    env = dict(env)
    with frame as iters:
        _bind_all(s.targets, iters, env)
        _body(script, i, j, env)


def _with(s: With, script, i, j, env):
    with ev(s.frame, env):
        _body(script, i, j, dict(env))


def _assign(s: Assign, script, i, j, env):
    _bind_all(s.targets, ev(s.value, env), env)


def _store(s: Store, script, i, j, env):
    value = ev(s.value, env)
    TB.buffer_store(ev(s.target.base, env), value, [ev(x, env) for x in s.target.index])


def _eval(s: Eval, script, i, j, env):
    if ev(s.call, env) is not None:   # T.func_attr, T.reads, T.writes, T.where add to their frame
        raise LoweringError(f"internal: the statement '{s.render()}' has a value")


_STMT = {Func: _func, For: _for, With: _with, Assign: _assign, Store: _store, Eval: _eval}


def _body(script, i: int, end: int, env):
    """Statements ``script[i:end]``: each one with the deeper ones after it as its body."""
    while i < end:
        depth, stmt = script[i]
        j = i + 1
        while j < end and script[j][0] > depth:
            j += 1
        _STMT[type(stmt)](stmt, script, i + 1, j, env)
        i = j


def build(script):
    """The PrimFunc of ``script``, checked well-formed as the parser checks it (TVM's exceptions
    pass through, as they would from the parser)."""
    with IRBuilder() as ib:
        _body(script, 0, len(script), {})
    f = ib.get()
    tvm.s_tir.analysis.verify_well_formed(tvm.IRModule.from_expr(f))
    return f
