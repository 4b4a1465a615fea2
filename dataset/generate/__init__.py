"""The generation stage, ``python -m dataset.generate`` (``driver``: options, the job's tasks on a
backend, the journal, then the assembly). One task a program (``task``: its rows, states from
``walk``, target no-ops from ``noop``; run by ``task_module`` in a worker process or a Ray task),
from ``program_sources`` (files, folders, workloads; ``shrink``: smaller instances)."""
