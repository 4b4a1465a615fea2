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


TERM = "+A^{f32,g}_{tx,a}*W^{f32,g}_{a}"
GOOD_JSON = json.dumps({"name": "ok", "inputs": [{"name": "A", "dtype": "f32", "shape": [16, 8]},
                                                {"name": "W", "dtype": "f32", "shape": [8]}],
                        "outputs": [{"name": "C", "dtype": "f32", "shape": [16]}], "leir": GOOD})
DEEP_CALLS = GOOD.replace("*W^{f32,g}_{a}", "*" + "exp(" * 200 + "W^{f32,g}_{a}" + ")" * 200)
DEEP_NESTS = GOOD.replace("[C", "[" + "".join(f"L^{{1}}_{{z{chr(97 + k // 26)}{chr(97 + k % 26)}=0}}["
                                               for k in range(150)) + "C", 1).replace("];", "];" * 151, 1)


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
    # deep nesting: located at the first node (or bracket) past the limit
    ("deep-calls", "t.leir", bad(DEEP_CALLS), r"nested more than 100 levels deep", 4,
     DEEP_CALLS.index("exp(") + 4 * (101 - 5) + 1),  # nest, equation, +, * and 96 calls: the 97th is too deep
    ("deep-chain", "t.leir", bad(GOOD.replace(TERM, TERM * 300)),
     r"nested more than 100 levels deep", 4, GOOD.index("=C") + 2),
    ("deep-nests", "t.leir", bad(DEEP_NESTS), r"nested more than 100 levels deep", 4,
     DEEP_NESTS.index("L^{1}_{zdv=0}") + 1),  # the 100th inner nest ("zdv", number 99) is level 101
    ("deep-json", "t.json", "[" * 101 + "]" * 101, r"JSON nested more than 100 levels deep", 1, 101),
    ("deep-jsonl", "t.jsonl", GOOD_JSON + "\n" + '{"a": ' * 200 + "1" + "}" * 200, r"JSON nested more than 100", 2,
     6 * 100 + 1),
    # numbers: ASCII digits only, bounded
    ("fullwidth-digit-extent", "t.leir", bad(GOOD.replace("L^{8}", "L^{８}")), r"unexpected character '８'", 4, 17),
    ("arabic-digit-index", "t.leir", bad(GOOD.replace("W^{f32,g}_{a}", "W^{f32,g}_{٣}")),
     r"unexpected character '٣'", 4, GOOD.index("W^") + 12),
    ("superscript-digit-shape", "t.leir", "input A f32[16, 8²]\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"shape entries must be positive integers, got '8²'", 1, 17),
    ("devanagari-digit-shape", "t.leir", "input A f32[१६, 8]\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"shape entries must be positive integers, got '१६'", 1, 13),
    ("huge-literal", "t.leir", bad(GOOD.replace("*W", "*" + "9" * 5000 + "*W")),
     r"integer literal 9999999999\.\.\.9999 \(5000 digits\) is out of range: at most 19 digits", 4,
     GOOD.index("*W") + 2),
    ("long-literal-leading-zeros", "t.leir", bad(GOOD.replace("*W", "*" + "0" * 30 + "7*W")),
     r"integer literal 0000000000\.\.\.0007 \(31 digits\) is out of range", 4, None),
    ("literal-above-int64", "t.leir", bad(GOOD.replace("*W", "*9223372036854775808*W")),
     r"integer literal 9223372036854775808 is out of range", 4, None),
    ("huge-extent", "t.leir", bad(GOOD.replace("L^{8}", "L^{" + "9" * 5000 + "}")),
     r"loop extent 9999999999\.\.\.9999 \(5000 digits\) exceeds the limit 2147483647", 4, 17),
    ("extent-above-int32", "t.leir", bad(GOOD.replace("L^{8}", "L^{2147483648}")),
     r"loop extent 2147483648 exceeds the limit 2147483647", 4, 17),
    ("huge-loop-start", "t.leir", bad(GOOD.replace("a=0", "a=" + "9" * 5000)), r"loop start .* exceeds the limit",
     4, None),
    ("huge-shape-header", "t.leir", "input A f32[16, " + "9" * 5000 + "]\ninput W f32[8]\noutput C f32[16]\n" + GOOD,
     r"shape entry 9999999999\.\.\.9999 \(5000 digits\) exceeds the limit 2147483647", 1, 17),
    ("huge-shape-json", "t.jsonl",
     json.dumps({"name": "x", "inputs": [{"name": "A", "dtype": "f32", "shape": [16, 10**30]}], "outputs": [],
                 "leir": GOOD}), r"each dimension of 'A' 1000000000\.\.\.0000 \(31 digits\) exceeds the limit", 1, 1),
    ("huge-shape-json-5000", "t.jsonl",
     '{"name": "x", "inputs": [{"name": "A", "dtype": "f32", "shape": [16, ' + "7" * 5000 + ']}], "outputs": [], '
     '"leir": ""}', r"each dimension of 'A' 7777777777\.\.\.7777 \(5000 digits\) exceeds the limit", 1, 1),
    # names: one pattern, every reader
    ("program-name-space", "t.leir", "program my prog\n" + HEADER + GOOD, r"program name 'my prog' is not valid", 1, 9),
    ("program-name-dash", "t.leir", "program -rf\n" + HEADER + GOOD, r"program name '-rf' is not valid", 1, 9),
    ("json-name-newline", "t.json", json.dumps({"name": "a\nb", "inputs": [], "outputs": [], "leir": GOOD}),
     r"program name 'a\\nb' is not valid: use letters, digits", 1, 1),
    ("json-name-empty", "t.jsonl", json.dumps({"name": "", "inputs": [], "outputs": [], "leir": GOOD}),
     r"program name '' is not valid", 1, 1),
    ("json-name-long", "t.jsonl", json.dumps({"name": "a" * 129, "inputs": [], "outputs": [], "leir": GOOD}),
     r"program name 'a{40}\.\.\.' is not valid", 1, 1),
    ("json-tensor-name-newline", "t.jsonl",
     json.dumps({"name": "x", "inputs": [{"name": "A\r", "dtype": "f32", "shape": [4]}], "outputs": [], "leir": GOOD}),
     r"tensor name 'A\\r' must be one capital letter", 1, 1),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 80
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


# --------------------------------------------------------------------------- names, positions


def test_a_file_name_that_is_no_program_name_gives_a_valid_default_name(tmp_path):
    from engine.leir.files import load_program, parse_program
    path = tmp_path / "my prog (v2).leir"
    path.write_text(leir(GOOD))
    p = load_program(path)
    assert p.name == "my_prog_v2_"
    assert parse_program(p.to_leir_file(), "x.leir") == p
    for stem, name in (("-x", "x"), (".hidden", "hidden"), ("ünï", "_n_"), ("a" * 300, "a" * 128), ("..", "program")):
        assert parse_program(leir(GOOD), f"{stem}.leir").name == name


@pytest.mark.parametrize("name", ["a b", "a\nb", "", "-rf", ".x", "a" * 129, "x#y", "ü", 5, None])
def test_no_program_with_a_bad_name_can_exist(name):
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import parse_program
    from engine.leir.program import Program
    good = parse_program(leir(GOOD), "ok.leir")
    with pytest.raises(LeirError, match="program name .* is not valid"):
        Program(name, good.inputs, good.outputs, good.body)
    if not isinstance(name, str):  # parse_program's name=None is the default name; JSON says "must be strings"
        return
    with pytest.raises(LeirError, match="program name .* is not valid"):
        parse_program(GOOD, name=name, inputs=good.inputs, outputs=good.outputs)
    with pytest.raises(LeirError, match="program name .* is not valid") as ex:
        parse_program(json.dumps({**good.to_json(), "name": name}), "x.json")
    assert "\n" not in ex.value.message and (ex.value.line, ex.value.col) == (1, 1)


def test_every_name_the_pattern_allows_round_trips():
    from engine.leir.files import parse_program
    good = parse_program(leir(GOOD), "ok.leir")
    for name in ("a", "0", "_", "Matmul3D", "v2.1-final", "a" * 128, "x.y.z", "A-b_c"):
        p = parse_program(GOOD, name=name, inputs=good.inputs, outputs=good.outputs)
        assert parse_program(p.to_leir_file(), "x.leir") == p
        assert parse_program(json.dumps(p.to_json()), "x.json") == p


@pytest.mark.parametrize("indent", [None, 2])
def test_errors_in_a_json_leir_string_point_at_the_character_in_the_file(indent, tmp_path):
    """Escapes (\\n, \\", \\u00e9) take several characters in the file: the column is the file's."""
    body = "B_{tx=0}^{16} L_{a=0}^{8} [\n  C_{tx}^{f32,g} = C_{tx}^{f32,g} + A_{tx,a}^{f32,g} * W_{a}^{f32,g} @;\n];"
    recs = [json.loads(GOOD_JSON), {**json.loads(GOOD_JSON), "name": "caf\u00e9-ok".replace("\u00e9", "e"),
                                    "note": "caf\u00e9 \"quoted\"", "leir": body}]
    text = json.dumps(recs, indent=indent)
    path = tmp_path / "x.json"
    path.write_text(text)
    rc = check.run_cli(check.main, [str(path)])
    assert rc == 2
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_programs
    with pytest.raises(LeirError, match="unexpected character '@'") as ex:
        load_programs(path)
    e = ex.value
    line = text.split("\n")[e.line - 1]
    assert line[e.col - 1] == "@", (e.line, e.col, line)
    assert "^" in e.format().splitlines()[-1]


def test_errors_in_a_jsonl_leir_string_point_at_the_character_in_the_line(tmp_path):
    rec = json.loads(GOOD_JSON)
    rec["leir"] = "B^{16}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+\u00e9;];"
    text = GOOD_JSON + "\n" + json.dumps(rec) + "\n"  # ensure_ascii: the é is written \u00e9
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_programs
    with pytest.raises(LeirError, match="unexpected character 'é'") as ex:
        load_programs(path)
    line = text.split("\n")[1]
    assert ex.value.line == 2 and line[ex.value.col - 1:].startswith("\\u00e9")


def test_a_nul_byte_is_the_same_error_from_a_file_and_from_text(tmp_path):
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_programs, parse_program
    text = leir(GOOD).replace("W f32[8]", "W f32[8]\x00")
    path = tmp_path / "x.leir"
    path.write_text(text)
    errors = []
    for read in (lambda: load_programs(path), lambda: parse_program(text, str(path))):
        with pytest.raises(LeirError, match="contains NUL bytes") as ex:
            read()
        errors.append(ex.value.format())
    assert errors[0] == errors[1] and errors[0].startswith(f"{path}:2:15: error:")
