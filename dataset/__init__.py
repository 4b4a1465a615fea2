"""Dataset side of the project: programs in, verified step-level training data out, and the
models trained and evaluated on it. One sub-package a stage, each importing only those before it
(``tests/test_floors.py``):

``text``: what a row says (the paper's formats, chain-of-thought traces, menu questions);
``assembly``: the output files (filtering, difficulty, mix, schema, card, plots);
``generate``: ``python -m dataset.generate``, one task a program, resumable, in local processes
or on Ray (``engine.plumbing.jobs``), then the assembly;
``check``: ``python -m dataset.check``, a dataset re-derived from its files;
``evaluate``: ``python -m dataset.evaluate``, a served model judged on a dataset;
``train``: ``python -m dataset.train``, a model tuned on datasets.
Shared by the stages: ``journal`` and ``progress`` (resumable jobs), ``timing`` (the timing labels
of rows and their checks), ``translate`` (PyTorch -> LEIR) and ``workloads`` (the library of
program types). See docs/dataset.md.
"""
