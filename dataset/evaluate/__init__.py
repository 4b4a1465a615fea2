"""The evaluation stage, ``python -m dataset.evaluate`` (``evaluation``: the journalled job that asks a
served model). The prompts come from a generated dataset's files (``items``); each answer is judged
as untrusted text (``judge``; a menu answered by a log-probability ranking: ``rank_answers``),
scored with the paper's metrics and their intervals (``metrics``), set beside random choice, fixed
positions, a strategy prior and the shipped cost model (``baselines``, ``strategy_prior``) on the
menus that can tell them apart (``menu_facts``, ``comparison``, ``signed_rank``) and written as a
report and a figure (``scorecard``). Reads the assembly's file schema; nothing below it imports it."""
