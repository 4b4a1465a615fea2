"""Malformed-input corpus: each case gives one clear located error, exit code 2, no traceback."""
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from engine import check

HEADER = "input A f32[16, 8]\ninput W f32[8]\noutput C f32[16]\n"
GOOD = "B^{16}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a}*W^{f32,g}_{a};];"


def leir(body: str, header: str = HEADER) -> str:
    return header + body + "\n"


def bad(body: str) -> str:
    return leir(body)


# (id, file name, content, message regex, line, col) -- line/col None: not asserted
CASES = [
    # truncated text and unbalanced brackets
    ("truncated-mid-ref", "t.leir", bad(GOOD[:40]), r"unexpected end of input", 4, None),
    ("truncated-no-close", "t.leir", bad(GOOD[:-2]), r"unexpected end of input", 4, None),
    ("truncated-no-semicolon", "t.leir", bad(GOOD[:-1]), r"unexpected end of input", 4, None),
    ("missing-open-bracket", "t.leir", bad(GOOD.replace("[", "", 1)), r"unexpected", 4, None),
    ("extra-close-bracket", "t.leir", bad(GOOD.replace("];", "]];", 1)), r"unexpected '\]'", 4, None),
    ("unbalanced-paren", "t.leir", bad(GOOD.replace("+A", "+(A")), r"unexpected", 4, None),
    ("unbalanced-brace", "t.leir", bad(GOOD.replace("_{tx,a}", "_{tx,a", 1)), r"unexpected", 4, None),
    ("extra-paren", "t.leir", bad(GOOD.replace("*W", ")*W")), r"unexpected '\)'", 4, None),
    ("missing-equals", "t.leir", bad(GOOD.replace("}=C", "}C", 1)), r"unexpected", 4, None),
    ("double-operator", "t.leir", bad(GOOD.replace("+A", "+*A")), r"unexpected '\*'", 4, None),
    ("empty-body-brackets", "t.leir", bad("B^{16}_{tx=0}[];"), r"unexpected '\]'", 4, 15),
    ("no-loops", "t.leir", bad("[C^{f32,g}_{tx}=1;];"), r"unexpected '\['", 4, 1),
    # unknown functions, operators, characters
    ("unknown-function", "t.leir", bad(GOOD.replace("A^{f32,g}_{tx,a}*", "tanh(A^{f32,g}_{tx,a})*")),
     r"unknown function 'tanh'", 4, None),
    ("wrong-arity-max", "t.leir", bad(GOOD.replace("C^{f32,g}_{tx}+A", "max(C^{f32,g}_{tx})+A")),
     r"'max' takes 2 arguments, got 1", 4, None),
    ("wrong-arity-exp", "t.leir", bad(GOOD.replace("*W^{f32,g}_{a}", "*exp(W^{f32,g}_{a},1)")),
     r"'exp' takes 1 argument, got 2", 4, None),
    ("function-without-call", "t.leir", bad(GOOD.replace("*W^{f32,g}_{a}", "*exp")), r"must be called", 4, None),
    ("unknown-character", "t.leir", bad(GOOD.replace("*", "@", 1)), r"unexpected character '@'", 4, None),
    ("dollar-sign", "t.leir", bad(GOOD.replace("+", "$", 1)), r"unexpected character '\$'", 4, None),
    # tensors: undeclared, misnamed, bad dtype/scope
    ("undeclared-tensor", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "Q^{f32,g}_{a}")),
     r"'Q' is not a known tensor and is never written", 4, None),
    ("misnamed-lowercase-tensor", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "w^{f32,g}_{a}")),
     r"unexpected", 4, None),
    ("reserved-initial-tensor", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "Ta^{f32,g}_{a}")),
     r"reserved letter", 4, None),
    ("reserved-initial-P", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "Pq^{f32,g}_{a}")), r"reserved letter", 4, None),
    ("wrong-dtype-code", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{f31,g}")), r"unknown dtype code 'f31'", 4, None),
    ("wrong-dtype-word", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{float,g}")), r"unknown dtype code 'float'", 4, None),
    ("dtype-mismatch-known", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{f16,g}")),
     r"'W' is declared f32 but used as f16", 4, None),
    ("bad-scope", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{f32,x}")), r"unknown memory scope 'x'", 4, None),
    ("missing-scope", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{f32}")), r"unexpected", 4, None),
    ("known-tensor-shared", "t.leir", bad(GOOD.replace("W^{f32,g}", "W^{f32,s}")), r"must have scope g", 4, None),
    ("rank-mismatch", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{a,0}")),
     r"'W' has rank 1 but is indexed with 2 subscripts", 4, None),
    # out-of-bounds reads and shape mismatches with the header
    ("oob-read-known", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{a+1}")),
     r"read of 'W' out of bounds: index 0 \('a\+1'\) ranges over \[1, 8\]", 4, None),
    ("oob-read-negative", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{a-1}")),
     r"read of 'W' out of bounds", 4, None),
    ("oob-read-intermediate", "t.leir",
     bad("B^{16}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,0};];B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{15-tx+1};];"),
     r"read of 'D' out of bounds", 4, None),
    ("shape-mismatch-output", "t.leir", leir(GOOD, HEADER.replace("C f32[16]", "C f32[32]")),
     r"output 'C' is declared with shape \[32\] but the program writes shape \[16\]", 4, None),
    ("shape-mismatch-output-rank", "t.leir", leir(GOOD, HEADER.replace("C f32[16]", "C f32[16, 1]")),
     r"'C' has rank 2 but is indexed with 1 subscript", 4, None),
    ("write-out-of-declared", "t.leir", leir(GOOD, HEADER.replace("C f32[16]", "C f32[8]")),
     r"write to 'C' out of bounds", 4, None),
    ("input-shape-too-small", "t.leir", leir(GOOD, HEADER.replace("A f32[16, 8]", "A f32[16, 4]")),
     r"read of 'A' out of bounds", 4, None),
    ("output-never-written", "t.leir", leir("B^{16}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,0};];"),
     r"output 'C' is never written", 3, None),
    # loop variables and bindings
    ("bad-binding-name", "t.leir", bad(GOOD.replace("tx", "qx")), r"must be named tx, ty, tz, bx, by or bz", 4, 1),
    ("duplicate-binding", "t.leir",
     bad("B^{16}_{tx=0}B^{8}_{txa=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,txa};];"),
     r"both bound to threadIdx.x", 4, 14),
    ("duplicate-loop-var", "t.leir", bad(GOOD.replace("L^{8}_{a=0}", "L^{8}_{tx=0}")), r"bound twice", 4, None),
    ("nonzero-start", "t.leir", bad(GOOD.replace("a=0", "a=1")), r"starts at 1", 4, None),
    ("zero-extent", "t.leir", bad(GOOD.replace("L^{8}", "L^{0}")), r"extent must be at least 1", 4, None),
    ("float-extent", "t.leir", bad(GOOD.replace("L^{8}", "L^{8.5}")), r"non-negative integer", 4, None),
    ("unknown-loop-kind", "t.leir", bad(GOOD.replace("L^{8}", "Q^{8}")), r"unknown loop kind 'Q'", 4, None),
    ("thread-limit", "t.leir", leir(GOOD.replace("16", "2048"), HEADER.replace("16", "2048")),
     r"above the hardware limit 1024", 4, 1),
    ("free-variable", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{c}")),
     r"'c' is not a loop variable of an enclosing loop", 4, None),
    ("read-before-write", "t.leir",
     bad("B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx};];B^{16}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,0};];"),
     r"'D' is read before it is written", 4, 30),
    ("write-input", "t.leir", bad("B^{16}_{tx=0}[A^{f32,g}_{tx,0}=1;C^{f32,g}_{tx}=A^{f32,g}_{tx,0};];"),
     r"inputs are read-only", 4, 15),
    ("sibling-form", "t.leir",
     bad("B^{16}_{tx=0}[C^{f32,g}_{tx}=0;]L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"),
     r"'sibling' form", 4, None),
    ("float-index", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{a/2}")),
     r"operator '/' cannot be used in an index", 4, None),
    # header errors
    ("header-typo", "t.leir", "inptu A f32[16, 8]\n" + HEADER + GOOD, r"unknown header line 'inptu'", 1, 1),
    ("header-bad-shape", "t.leir", "input A f32[16, x]\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"shape entries must be positive integers, got 'x'", 1, None),
    ("header-bad-dtype", "t.leir", "input A f33[16, 8]\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"unknown dtype code 'f33'", 1, 9),
    ("header-missing-shape", "t.leir", "input A f32\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"expected 'input NAME DTYPE\[d0, d1, ...\]'", 1, None),
    ("header-duplicate", "t.leir", "input A f32[16, 8]\n" + HEADER + GOOD, r"'A' is declared twice", 2, None),
    ("header-no-output", "t.leir", "input A f32[16, 8]\ninput W f32[8]\n" + GOOD, r"no output declared", 1, 1),
    ("header-only", "t.leir", HEADER, r"no program body", None, None),
    ("header-lowercase-name", "t.leir", "input a f32[16, 8]\n" + GOOD, r"must be one capital letter", 1, 7),
    # empty, binary, JSON
    ("empty-file", "t.leir", "", r"empty program file", 1, 1),
    ("whitespace-file", "t.leir", "  \n\n ", r"empty program file", 1, 1),
    ("binary-garbage", "t.leir", b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00garbage", r"not a text file", 1, None),
    ("nul-bytes", "t.leir", "input A f32[1]\x00\n", r"not a text file", 1, None),
    ("json-syntax", "t.json", '{"name": "x", "inputs": [}', r"invalid JSON", 1, 26),
    ("json-missing-leir", "t.json", json.dumps({"name": "x", "inputs": [], "outputs": []}), r"missing 'leir'", 1, 1),
    ("json-bad-shape", "t.jsonl",
     json.dumps({"name": "x", "inputs": [{"name": "A", "dtype": "f32", "shape": [0]}], "outputs": [], "leir": GOOD}),
     r"shape of 'A' must be positive integers", 1, 1),
    ("json-bad-leir", "t.jsonl",
     json.dumps({"name": "ok", "inputs": [{"name": "A", "dtype": "f32", "shape": [16, 8]},
                                          {"name": "W", "dtype": "f32", "shape": [8]}],
                 "outputs": [{"name": "C", "dtype": "f32", "shape": [16]}], "leir": GOOD}) + "\n" +
     json.dumps({"name": "bad", "inputs": [{"name": "A", "dtype": "f32", "shape": [16, 8]}],
                 "outputs": [{"name": "C", "dtype": "f32", "shape": [16]}], "leir": GOOD}),
     r"'W' is not a known tensor", 2, None),
    ("json-not-object", "t.jsonl", "[1, 2]", r"must be a JSON object", 1, 1),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 50
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_gives_one_located_error(case, tmp_path, capsys):
    _, fname, content, pattern, line, col = case
    path = tmp_path / fname
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    rc = check.run_cli(check.main, [str(path)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    first = err.splitlines()[0]
    m = re.match(re.escape(str(path)) + r"(?::(\d+):(\d+))?: error: (.*)$", first)
    assert m, first
    assert re.search(pattern, m.group(3)), first
    if line is not None:
        assert int(m.group(1)) == line, first
    if col is not None:
        assert int(m.group(2)) == col, first
    assert sum(": error: " in l for l in err.splitlines()) == 1
    assert "Traceback" not in err


def test_cli_process_never_shows_a_traceback(tmp_path):
    files = []
    for name, fname, content, *_ in CASES[::7]:
        p = tmp_path / f"{name}-{fname}"
        (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)
        files.append(str(p))
    good = tmp_path / "good.leir"
    good.write_text(leir(GOOD))
    r = subprocess.run([sys.executable, "-m", "engine.check", *files, str(good)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.count(": error: ") == len(files)
    assert r.stdout == GOOD + "\n"  # valid programs are still printed


def test_check_prints_one_canonical_line_per_program_in_order(tmp_path):
    a = tmp_path / "a.leir"
    a.write_text(leir(GOOD))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"name": "b", "inputs": [{"name": "A", "dtype": "f32", "shape": [4]}],
                             "outputs": [{"name": "C", "dtype": "f32", "shape": [4]}],
                             "leir": "B_{tx=0}^{4} [ C_{tx}^{f32,g} = exp(A_{tx}^{f32,g}) ; ] ;"}))
    r = subprocess.run([sys.executable, "-m", "engine.check", str(b), str(a)], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["B^{4}_{tx=0}[C^{f32,g}_{tx}=exp(A^{f32,g}_{tx});];", GOOD]


def test_check_json_summary(tmp_path):
    a = tmp_path / "a.leir"
    a.write_text(leir(GOOD))
    r = subprocess.run([sys.executable, "-m", "engine.check", "--json", str(a)], cwd=ROOT, capture_output=True,
                       text=True)
    s = json.loads(r.stdout)
    roles = {t["name"]: (t["role"], t["shape"]) for t in s["tensors"]}
    assert roles == {"A": ("input", [16, 8]), "W": ("input", [8]), "C": ("output", [16])}
    assert s["reductions"] == [{"tensor": "C", "path": [0, 0], "axes": ["a"], "init": "0"}]
    assert s["statements"] == 1
