"""``Program``: the immutable, analysed unit every other part of the project passes around."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from engine.leir.ast import Nest, TensorDecl
from engine.leir.limits import check_program_name
from engine.leir.printer import body_to_str, item_to_str, with_printed_parens
from engine.leir.semantics import ProgramInfo, analyze


@dataclass(frozen=True)
class Program:
    """A checked LEIR program: known tensors plus a body whose inits are explicit.

    Build it with ``make_program``; the constructor alone checks only the name (the body is
    analysed, and so checked, on first use of ``info``).
    """

    name: str
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    body: tuple[Nest, ...]
    _info: ProgramInfo | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        # the name is written into 'program NAME' headers and file names: every Program can be
        # written to a .leir file and read back (limits.PROGRAM_NAME)
        check_program_name(self.name)

    @property
    def info(self) -> ProgramInfo:
        if self._info is None:  # constructed directly: analyse on first use
            _, info = analyze(self.inputs, self.outputs, self.body)
            object.__setattr__(self, "_info", info)
        return self._info

    def _checked_body(self):
        """The body, analysed first if this Program was constructed directly: nothing unchecked
        (too deep, malformed) reaches the printer."""
        _ = self.info
        return self.body

    @cached_property
    def leir(self) -> str:
        return body_to_str(self._checked_body())

    def to_leir(self) -> str:
        """Canonical Step-TP text of the body."""
        return self.leir

    @property
    def known(self) -> tuple[TensorDecl, ...]:
        return self.inputs + self.outputs

    def as_read_back(self) -> "Program":
        """This program as the parser builds it from its own text: the same tree with the
        ``paren`` flags its printed parentheses imply (``printer.with_printed_parens``); itself
        when it is so already. Its analysis is kept (flags mean nothing to it)."""
        memo: dict = {}
        body = tuple(with_printed_parens(n, memo) for n in self.body)
        if all(a is b for a, b in zip(body, self.body)):
            return self
        return Program(self.name, self.inputs, self.outputs, body, self._info)

    def with_body(self, body, check_inits: bool = False) -> "Program":
        """The same known tensors over a new body, re-analysed (raises ``LeirError``)."""
        return make_program(self.name, self.inputs, self.outputs, body, check_inits=check_inits)

    def to_json(self) -> dict:
        """The corpus JSON record ``{name, inputs, outputs, leir}``."""
        decl = lambda d: {"name": d.name, "dtype": d.dtype, "shape": list(d.shape)}  # noqa: E731
        return {"name": self.name, "inputs": [decl(d) for d in self.inputs],
                "outputs": [decl(d) for d in self.outputs], "leir": self.to_leir()}

    def to_leir_file(self) -> str:
        """The ``.leir`` file text: header, then one canonical top-level statement per line."""
        shape = lambda s: "[" + ", ".join(str(n) for n in s) + "]"  # noqa: E731
        lines = [f"program {self.name}"]
        width = max(len(d.name) for d in self.known)
        lines += [f"input  {d.name:<{width}} {d.dtype}{shape(d.shape)}" for d in self.inputs]
        lines += [f"output {d.name:<{width}} {d.dtype}{shape(d.shape)}" for d in self.outputs]
        lines.append("")
        lines += [item_to_str(n) for n in self._checked_body()]
        return "\n".join(lines) + "\n"


def make_program(name: str, inputs, outputs, body, check_inits: bool = False) -> Program:
    """Analyse and build a ``Program``; raises ``engine.diagnostics.LeirError`` if invalid."""
    inputs, outputs = tuple(inputs), tuple(outputs)
    body, info = analyze(inputs, outputs, tuple(body), check_inits=check_inits)
    return Program(name, inputs, outputs, body, info)
