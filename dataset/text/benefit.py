"""The reason in a trace: what the step can improve here (the block's ``@benefit``), and with a timing
record, what it measurably did.

One sentence per benefit the rule block declares, in its order: ``This can improve parallelism:
the loop `i` becomes parallelized.`` The instance part after the colon is the first template of
``TEMPLATES[benefit]`` whose slots all hold for the step: the slots are the chain-of-thought's own
facts and rule parameters (``engine.rewrite.cot_template`` syntax, filled by ``dataset.text.cot``,
re-derived by ``dataset.check.claims``), so a benefit sentence states only what the two programs and the
provenance show. Each list ends with a slot-free sentence (the benefit's definition), used when no
fact of the step bears on it. A block without ``@benefit`` gets no sentence; ``@benefit none`` says
that the step improves nothing by itself.

With a timing record (``dataset.timing``), one more sentence: the measured speedup over the parent
program, its interval, the rounds, the verdict and where it was measured.
"""
from __future__ import annotations

from engine.rewrite.cot_template import parse_template
from engine.rewrite.meta import BENEFITS

# benefit -> how the sentence names it
PHRASES = {"parallelism": "parallelism", "vector_width": "the vector width", "memory_traffic": "memory traffic",
           "locality": "locality", "reuse": "reuse", "arithmetic": "the arithmetic", "launch_count": "the launch count",
           "loop_overhead": "the loop overhead", "numerical_stability": "numerical stability"}
NONE_SENTENCE = " By itself this step improves nothing: it enables other strategies or undoes one."
OPENING = " This can improve {phrase}: "

_LOOPS = "the loops change from {loop_from} to {loop_to}"
_CHANGE = "the statements change from {removed} to {added}"
_SWAP = "the statements {first} and {second} exchange places."      # a move: nothing removed or added
# benefit -> instance templates, tried in order (the last one has no slot: the benefit's definition)
TEMPLATES_TEXT = {
    "parallelism": [
        "the loop {param.loop} is bound to {param.tag:thread} as {bound_var}, one iteration per thread or block.",
        "the loop {param.loop} becomes {loop_kind}.",
        "the {split_extent} iterations of {split_axis} are divided among computations of {split_parts} "
        "iterations.",
        _LOOPS + ", loops that can be parallelized or bound separately.",
        _SWAP,
        _CHANGE + ".",
    ],
    "vector_width": [
        "the loop {param.loop} becomes {loop_kind}.",
        _LOOPS + ", an inner loop that can be vectorized.",
        "the loops {swapped} exchange their positions, which changes the innermost loop.",
        _SWAP,
        _CHANGE + ".",
    ],
    "memory_traffic": [
        "the intermediate {gone_tensor} is no longer written to memory and read back.",
        "{dead} is no longer written.",
        "{param.tensor} is staged in {param.scope:scope} memory as {new_tensor}.",
        _SWAP,
        _CHANGE + ".",
    ],
    "locality": [
        "{param.tensor} is staged in {param.scope:scope} memory as {new_tensor}.",
        "the intermediate {param.tensor} is kept in {param.scope:scope} memory as {retyped}.",
        "{param.tensor} is laid out anew as {new_tensor} by {copies}.",
        "the references of the intermediate {param.tensor} change from {ref_before} to {ref_after}.",
        "the loops {swapped} exchange their positions.",
        _LOOPS + ".",
        "the intermediate {gone_tensor} is no longer written to memory and read back.",
        _SWAP,
        _CHANGE + ".",
    ],
    "reuse": [
        "the index {index} is computed once into {new_tensor}.",
        "the common part {common} is computed once by {computes}.",
        _LOOPS + ", so a tile's data can be reused while it is in cache.",
        _SWAP,
        _CHANGE + ".",
    ],
    "arithmetic": [
        "{dead} is no longer computed.",
        "the common part {common} is computed once by {computes}.",
        "{equation} becomes {equation_after}.",
        _SWAP,
        _CHANGE + ".",
    ],
    "launch_count": [
        "the loop nests change from {removed} to {added}.",
    ],
    "loop_overhead": [
        "the loop {param.loop} becomes {loop_kind}.",
        _LOOPS + ".",
        _SWAP,
        _CHANGE + ".",
    ],
    "numerical_stability": [
        "{equation} becomes {equation_after}.",
        _SWAP,
        _CHANGE + ".",
    ],
}
for _b in TEMPLATES_TEXT:
    TEMPLATES_TEXT[_b].append(BENEFITS[_b] + ".")


def _parse(text: str):
    tpl, why = parse_template(text, 0)
    assert tpl is not None, why
    return tpl


TEMPLATES = {b: tuple(_parse(t) for t in texts) for b, texts in TEMPLATES_TEXT.items()}
assert set(TEMPLATES) | {"none"} == set(BENEFITS), sorted(set(BENEFITS) ^ set(TEMPLATES))


def opening(benefit: str) -> str:
    return OPENING.format(phrase=PHRASES[benefit])


def benefit_sentences(benefits, facts, params, fill) -> str:
    """The sentences of a step (``facts``: ``dataset.text.cot.Facts``; ``params``: the step's;
    ``fill``: ``dataset.text.cot.fill``, which renders a template's slots; passed in, since the
    traces, which import this table, are what render it)."""
    out = []
    for b in benefits:
        if b == "none":
            out.append(NONE_SENTENCE)
            continue
        text = next(t for t in (fill(tpl, facts, params) for tpl in TEMPLATES[b]) if t is not None)
        out.append(opening(b) + text)
    return "".join(out)


def _num(x: float) -> str:
    return f"{x:.3f}"


VERDICT_WORDS = {"faster": "faster", "slower": "slower", "tie": "no faster or slower than the noise floor allows"}


def measured_sentence(timing: dict | None) -> str:
    """The measured effect of a step (``timing``: a ``dataset.timing`` record), or "" without one."""
    if not timing or timing.get("verdict") not in VERDICT_WORDS:
        return ""
    m = timing["machine"]
    where = timing["target"] + " on " + m["cpu"] + (f" with {m['gpu']}" if m.get("gpu") else "")
    lo, hi = timing["ci"]
    return (f" Measured: {_num(timing['speedup'])}x the speed of the given IR ({round(timing['confidence'] * 100)}% "
            f"interval {_num(lo)}x to {_num(hi)}x over {timing['rounds']} interleaved rounds, {where}), "
            f"so it is {VERDICT_WORDS[timing['verdict']]}.")
