"""nn.Module → LEIR ``Program`` through ``torch.export`` (ATen graph), one rule per op family.

The walk: export the module, fold every node that depends only on parameters, buffers and
constants (masks, weight chunks) into a constant, name the tensors the way the reference
translator does (user inputs, then graph intermediates with the output among them, then
parameters/buffers/constants, then temporaries), and let the rule for each remaining ATen op
emit its statements. An op without a rule is an error naming the op and the user's source
line; nothing is skipped silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from engine.leir.ast import TensorDecl
from engine.leir.diagnostics import LeirError
from engine.leir.program import Program, make_program

from .emitter import Emitter, TensorVal
from .registry import RULES, StackedPiece

TORCH_DTYPE_CODES = {
    "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32", "torch.float64": "f64",
    "torch.bool": "bool", "torch.int8": "i8", "torch.int16": "i16", "torch.int32": "i32",
    "torch.int64": "i64", "torch.uint8": "u8",
}

# ops that only rename their input (same values, shape and dtype)
ALIAS_OPS = {"alias", "detach", "lift_fresh_copy", "_to_copy", "to", "type_as", "view_as", "reshape_as",
             "expand_as"}
# identities the reference writes as a copy statement (leir.md A.4: contiguous, dropout)
COPY_OPS = {"clone", "contiguous", "dropout", "feature_dropout", "alpha_dropout"}
# ops whose tuple result the reference writes as one stacked tensor read back by getitem copies
SPLIT_OPS = {"split", "split_with_sizes", "chunk", "unbind", "tensor_split"}
# ops dropped from the graph: they have no value used by the output
NO_VALUE_OPS = {"_assert_tensor_metadata", "_assert_async", "_assert_scalar", "sym_constrain_range_for_size"}


def dtype_code(torch_dtype) -> str:
    code = TORCH_DTYPE_CODES.get(str(torch_dtype))
    if code is None:
        raise LeirError(f"dtype {torch_dtype} has no LEIR code")
    return code


def op_name(target) -> str:
    """The op packet name of an ATen target ("softmax" for aten.softmax.int)."""
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


@dataclass
class Const:
    """A value known at translation time (parameter, buffer, constant or folded subgraph)."""

    tensor: Any  # torch.Tensor


@dataclass
class Translation:
    """A translated program plus what it takes to run it.

    ``input_names[i]`` is the LEIR name of the module's i-th forward argument (None when the
    argument is not a tensor or not read); ``constants`` holds the values of the parameters,
    buffers and folded constants the program reads, by LEIR name.
    """

    program: Program
    input_names: tuple[Optional[str], ...]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # LEIR name -> parameter/buffer name

    def feed(self, *user_inputs) -> dict[str, np.ndarray]:
        """The program's input dict for forward arguments ``user_inputs`` (tensors or arrays)."""
        out = dict(self.constants)
        for name, x in zip(self.input_names, user_inputs):
            if name is not None:
                out[name] = to_numpy(x)
        return out


def to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            import torch
            x = x.to(torch.float32)
        return x.numpy().copy()
    return np.asarray(x)


# ---------------------------------------------------------------------------- locations

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)')


def user_frame(node) -> Optional[tuple[str, int, int]]:
    """(file, line, col) of the user's source line that created ``node``, if known."""
    trace = node.meta.get("stack_trace") or ""
    best = None
    for m in _FRAME.finditer(trace):
        f = m["file"]
        if "/torch/" in f or "/site-packages/" in f or f.startswith("<"):
            continue
        best = (f, int(m["line"]), 1)
    if best is not None:
        try:
            text = Path(best[0]).read_text().splitlines()[best[1] - 1]
            best = (best[0], best[1], len(text) - len(text.lstrip()) + 1)
        except (OSError, IndexError):
            pass
    return best


def located_error(message: str, node) -> LeirError:
    where = user_frame(node)
    if where is None:
        return LeirError(message)
    file, line, col = where
    source = None
    try:
        source = Path(file).read_text()
    except OSError:
        pass
    return LeirError(message, line, col, file=file, source=source)


# ---------------------------------------------------------------------------- rule context

class Ctx:
    """What a rule sees: the node, its pre-named output, argument values and the emitter."""

    def __init__(self, tr: "_Translator", node, out: Optional[TensorVal]):
        self.tr = tr
        self.node = node
        self.out = out
        self.em: Emitter = tr.em

    @property
    def op(self) -> str:
        return str(self.node.target)

    def arg(self, i: int, default=None):
        """Positional argument ``i`` (or the keyword of the same schema position) as a value."""
        a = self._raw(i, default)
        return self.tr.value(a)

    def _raw(self, i: int, default=None):
        if i < len(self.node.args):
            return self.node.args[i]
        schema = getattr(self.node.target, "_schema", None)
        if schema is not None and i < len(schema.arguments):
            name = schema.arguments[i].name
            if name in self.node.kwargs:
                return self.node.kwargs[name]
            if schema.arguments[i].has_default_value() and default is None:
                return schema.arguments[i].default_value
        return default

    def kwarg(self, name: str, default=None):
        if name in self.node.kwargs:
            return self.tr.value(self.node.kwargs[name])
        schema = getattr(self.node.target, "_schema", None)
        if schema is not None:
            for i, a in enumerate(schema.arguments):
                if a.name == name:
                    if i < len(self.node.args):
                        return self.tr.value(self.node.args[i])
                    if a.has_default_value():
                        return a.default_value
        return default

    def tensor(self, i: int) -> TensorVal:
        v = self.arg(i)
        if not isinstance(v, TensorVal):
            raise self.fail(f"argument {i} of {self.op} must be a tensor")
        return v

    def temp(self, shape, dtype: Optional[str] = None) -> TensorVal:
        return self.em.temp(dtype or self.out.dtype, shape)

    def fail(self, message: str) -> LeirError:
        return located_error(message, self.node)

    def unsupported(self, what: str) -> LeirError:
        return located_error(f"unsupported: {what} in {self.op}", self.node)


# ---------------------------------------------------------------------------- the walk

def _is_inplace(target) -> bool:
    name = op_name(target)
    return name.endswith("_") and not name.startswith("_")


class _Translator:
    def __init__(self, ep, name: str):
        self.ep = ep
        self.name = name
        self.em = Emitter()
        self.env: dict[str, Any] = {}
        self.names: dict[str, str] = {}       # node name -> LEIR name
        self.consts_named: dict[str, str] = {}  # node name of a Const used as an input -> LEIR name

    # values --------------------------------------------------------------------------
    def value(self, a):
        import torch.fx as fx
        if isinstance(a, fx.Node):
            v = self.env[a.name]
            if isinstance(v, Const):
                return self._const_input(a.name, v)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x) for x in a)
        return a

    def _const_input(self, node_name: str, c: Const) -> TensorVal:
        name = self.consts_named.get(node_name)
        if name is None:  # a constant first needed by a rule that was not planned for
            name = self.em.fresh_name()
            self.consts_named[node_name] = name
        t = c.tensor
        return TensorVal(name, dtype_code(t.dtype), tuple(t.shape))

    # planning --------------------------------------------------------------------------
    def run(self) -> Translation:
        import torch
        import torch.fx as fx
        ep = self.ep
        graph = ep.graph
        sig = ep.graph_signature
        kinds: dict[str, tuple[str, Any]] = {}
        for spec in sig.input_specs:
            kind = spec.kind.name
            arg_name = spec.arg.name
            if kind == "USER_INPUT":
                kinds[arg_name] = ("user", None)
            elif kind in ("PARAMETER", "BUFFER"):
                kinds[arg_name] = ("const", ep.state_dict[spec.target] if spec.target in ep.state_dict
                                   else ep.constants[spec.target])
            elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ"):
                kinds[arg_name] = ("const", ep.constants[spec.target])
            else:
                kinds[arg_name] = ("user", None)
        self.param_sources = {n: spec.target for spec in sig.input_specs
                              for n in [spec.arg.name] if spec.kind.name != "USER_INPUT"}

        nodes = list(graph.nodes)
        outputs = [n for n in nodes if n.op == "output"]
        out_args = outputs[0].args[0]
        if isinstance(out_args, (list, tuple)):
            tensors = [a for a in out_args if isinstance(a, fx.Node)]
            if len(tensors) != 1:
                raise LeirError(f"the module returns {len(tensors)} tensors; LEIR programs have exactly "
                                "one output")
            out_node = tensors[0]
        else:
            out_node = out_args

        # which nodes are reachable from the output (dead nodes are not translated)
        live: set[str] = set()
        stack = [out_node]
        while stack:
            n = stack.pop()
            if not isinstance(n, fx.Node) or n.name in live:
                continue
            live.add(n.name)
            stack.extend(n.all_input_nodes)

        # foldable: depends on no user input
        folded: set[str] = set()
        for n in nodes:
            if n.op == "placeholder" and kinds.get(n.name, ("user",))[0] == "const":
                folded.add(n.name)
            elif n.op == "call_function" and not _is_inplace(n.target) \
                    and all(a.name in folded for a in n.all_input_nodes) \
                    and op_name(n.target) not in ("dropout", "rand", "randn", "rand_like", "randn_like",
                                                  "bernoulli", "randint"):
                folded.add(n.name)

        # naming plan
        user_in = [n for n in nodes if n.op == "placeholder" and kinds.get(n.name, ("user",))[0] == "user"]
        order: list[str] = []
        for n in user_in:
            if n.name in live and isinstance(n.meta.get("val"), torch.Tensor):
                order.append(n.name)
        const_uses: list[str] = []
        for n in nodes:
            if n.op != "call_function" or n.name not in live or n.name in folded:
                continue
            for a in n.all_input_nodes:
                if a.name in folded and a.name not in const_uses:
                    const_uses.append(a.name)
            if self._needs_name(n):
                order.append(n.name)
        if out_node.name in folded:
            const_uses.append(out_node.name)
        # parameters/buffers in placeholder order, then folded values in graph order
        pos = {n.name: i for i, n in enumerate(nodes)}
        const_uses.sort(key=lambda k: pos[k])
        for k in order:
            self.names[k] = self.em.fresh_name()
        for k in const_uses:
            self.consts_named[k] = self.em.fresh_name()

        # evaluate / emit
        for n in nodes:
            if n.op == "placeholder":
                kind, val = kinds.get(n.name, ("user", None))
                if kind == "const":
                    self.env[n.name] = Const(val)
                else:
                    v = n.meta.get("val")
                    if isinstance(v, torch.Tensor) and n.name in self.names:
                        self.env[n.name] = TensorVal(self.names[n.name], dtype_code(v.dtype), tuple(v.shape))
                    else:
                        self.env[n.name] = v
            elif n.op == "call_function":
                if n.name not in live:
                    continue
                if n.name in folded:
                    self.env[n.name] = self._fold(n)
                else:
                    self.env[n.name] = self._emit(n)
            elif n.op in ("output", "get_attr"):
                continue
            else:
                raise located_error(f"unsupported graph node {n.op} {n.target}", n)

        result = self.value(out_node)
        out_name = self.names.get(out_node.name)
        if not isinstance(result, TensorVal):
            raise LeirError("the module's output is not a tensor")
        if out_name is None or result.name != out_name or result.name in self.consts_named.values() \
                or any(result.name == self.names.get(u.name) for u in user_in):
            # the output aliases an input or constant: copy it into a fresh output tensor
            out = TensorVal(self.em.fresh_name(), result.dtype, result.shape)
            self.em.map(out, lambda vs: result(*vs))
            result = out
        return self._finish(result, user_in)

    def _needs_name(self, n) -> bool:
        name = op_name(n.target)
        if name in NO_VALUE_OPS:
            return False
        if name == "getitem":
            src = n.args[0]
            return op_name(src.target) in SPLIT_OPS if hasattr(src, "target") else False
        if name in ALIAS_OPS and self._is_alias(n):
            return False
        return True

    @staticmethod
    def _is_alias(n) -> bool:
        v = n.meta.get("val")
        src = n.args[0] if n.args else None
        sv = getattr(src, "meta", {}).get("val") if src is not None else None
        if v is None or sv is None or not hasattr(v, "shape") or not hasattr(sv, "shape"):
            return False
        if tuple(v.shape) != tuple(sv.shape) or v.dtype != sv.dtype:
            return False
        name = op_name(n.target)
        if name in ("dropout", "feature_dropout", "alpha_dropout"):
            p = n.args[1] if len(n.args) > 1 else 0.5
            train = n.args[2] if len(n.args) > 2 else True
            return p == 0 or not train
        return True

    def _fold(self, n):
        import torch
        args = self._materialize(n.args)
        kwargs = self._materialize(n.kwargs)
        try:
            with torch.no_grad():
                out = n.target(*args, **kwargs)
        except Exception as ex:  # noqa: BLE001 - report where the user wrote it
            raise located_error(f"cannot evaluate {n.target} on constants: {ex}", n) from ex
        if isinstance(out, torch.Tensor):
            return Const(out)
        if isinstance(out, (list, tuple)):
            return tuple(Const(o) if isinstance(o, torch.Tensor) else o for o in out)
        return out

    def _materialize(self, a):
        import torch.fx as fx
        if isinstance(a, fx.Node):
            v = self.env[a.name]
            return v.tensor if isinstance(v, Const) else v
        if isinstance(a, (list, tuple)):
            return type(a)(self._materialize(x) for x in a)
        if isinstance(a, dict):
            return {k: self._materialize(v) for k, v in a.items()}
        return a

    def _emit(self, n):
        import torch
        name = op_name(n.target)
        if name in NO_VALUE_OPS:
            return None
        if name == "getitem":
            src = self.env[n.args[0].name]
            item = src[n.args[1]]
            if n.name in self.names:  # a piece of a split: copy it out of the stacked tensor
                out = TensorVal(self.names[n.name], item.dtype, item.shape)
                if isinstance(item, StackedPiece):
                    self.em.map(out, lambda vs: item.base(item.index, *vs))
                    return out
                self.em.map(out, lambda vs: item(*vs))
                return out
            return item
        if name in ALIAS_OPS and self._is_alias(n):
            return self.value(n.args[0])
        if name in COPY_OPS:
            if not self._is_alias(n):
                raise located_error(f"unsupported operation {n.target}: random dropout cannot be translated "
                                    "(use p=0 or eval mode)", n)
            src = self.value(n.args[0])
            out = TensorVal(self.names[n.name], src.dtype, src.shape)
            self.em.map(out, lambda vs: src(*vs))
            return out
        v = n.meta.get("val")
        out = None
        if isinstance(v, torch.Tensor) and n.name in self.names:
            out = TensorVal(self.names[n.name], dtype_code(v.dtype), tuple(v.shape))
        fn = RULES.get(name)
        if fn is None:
            raise located_error(f"unsupported operation {n.target}: no LEIR translation rule for "
                                f"'{name}'", n)
        ctx = Ctx(self, n, out)
        if isinstance(v, (list, tuple)) and n.name in self.names:
            ctx.out_name = self.names[n.name]
        return fn(ctx)

    def _finish(self, result: TensorVal, user_in) -> Translation:
        import torch
        inputs: list[TensorDecl] = []
        input_names: list[Optional[str]] = []
        for n in user_in:
            nm = self.names.get(n.name)
            v = self.env.get(n.name)
            input_names.append(nm if isinstance(v, TensorVal) else None)
        read = _read_names(self.em.body)
        for n in user_in:
            v = self.env.get(n.name)
            if isinstance(v, TensorVal) and v.name in read:
                inputs.append(TensorDecl(v.name, v.dtype, v.shape))
        input_names = [nm if nm in read else None for nm in input_names]
        constants: dict[str, np.ndarray] = {}
        sources: dict[str, str] = {}
        for node_name, leir_name in self.consts_named.items():
            if leir_name not in read:
                continue
            c = self.env[node_name]
            t = c.tensor if isinstance(c, Const) else c
            if not isinstance(t, torch.Tensor):
                continue
            inputs.append(TensorDecl(leir_name, dtype_code(t.dtype), tuple(t.shape)))
            constants[leir_name] = to_numpy(t)
            sources[leir_name] = self.param_sources.get(node_name, node_name)
        outputs = (TensorDecl(result.name, result.dtype, result.shape),)
        try:
            prog = make_program(self.name, inputs, outputs, self.em.body)
        except LeirError as ex:
            raise LeirError(f"internal error: the translation of '{self.name}' is not a valid program: "
                            f"{ex.message}") from ex
        return Translation(prog, tuple(input_names), constants, sources)


def _read_names(body) -> set[str]:
    from engine.leir.ast import equations, refs
    out: set[str] = set()
    for _, eq in equations(body):
        for r in refs(eq.rhs):
            out.add(r.name)
        for i in eq.lhs.index:
            for r in refs(i):
                out.add(r.name)
    return out


def export(module, example_inputs):
    """``torch.export`` of ``module`` on ``example_inputs``; export failures are user errors."""
    import torch
    try:
        return torch.export.export(module, tuple(example_inputs))
    except Exception as ex:  # noqa: BLE001 - torch raises many kinds here
        msg = str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__
        raise LeirError(f"torch.export cannot trace the module: {msg}") from ex


def translate(module, example_inputs, name: str = "program") -> Translation:
    """Translate ``module(*example_inputs)`` to an LEIR program (raises ``LeirError``)."""
    from . import rules  # noqa: F401 - registers the rules
    ep = export(module, example_inputs)
    return _Translator(ep, name).run()
