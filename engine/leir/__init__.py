"""The LEIR language: grammar, typed AST, parser, canonical printer, diagnostics, semantics and
program files. Imports nothing of the rewriting, nor tvm or torch."""
