"""The evaluation stage, ``python -m dataset.evaluate`` (``evaluation``: the journalled job that asks a
served model). The prompts come from a generated dataset's files (``items``); each answer is judged
as untrusted text (``judge``), scored with the paper's metrics and their intervals (``metrics``),
set beside random choice and the shipped cost model (``baselines``) and written as a report and a
figure (``scorecard``). Reads the assembly's file schema; nothing below it imports it."""
