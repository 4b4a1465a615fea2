"""The output files of a job, from the tasks' rows: the paper's filtering, difficulty and mix
rules, the multi-answer and menu rows, the files' schema (``file_schema``), the dataset card and
plots, and what ``stats.json`` says about states (``assemble``: the assembly itself). Reads the
text of rows (``dataset.text``); the generation job calls it once its tasks are done."""
