"""Shared plumbing at the ground floor, for every package above: worker processes a crash cannot
take the caller down with (``procs``) and where a job's tasks run, local worker processes or Ray
(``jobs``). Knows nothing of the language, the rewriting or what a task does."""
