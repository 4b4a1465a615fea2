"""Dataset side of the project: programs in, verified step-level training data out.

``python -m dataset.generate`` (``generate``: the job; ``task``: one program's rows; ``cot`` and
``claims``: traces and their checker; ``prompts``, ``filtering``, ``difficulty``: the paper's
formats and rules; ``assemble``, ``schema``, ``card``, ``plots``: the output files; ``journal``,
``worker``: resumable execution, one task a program, in local processes or on Ray (``engine.plumbing.jobs``);
``sources``, ``shrink``: inputs);
``python -m dataset.check`` re-derives a dataset. ``translate`` (PyTorch -> LEIR) and
``workloads`` (the library of program types) supply programs. See docs/dataset.md.
"""
