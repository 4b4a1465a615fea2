"""What a row says: the paper's prompt, label and answer formats (``row_format``), the
chain-of-thought traces (``cot``) and their measured reasons (``benefit``), and the menu
question and answer of a state (``menu``, the search's own question), and the kernel search's
question at a slot's kernel with its answer (``kernel_menu``). Below every other stage
of the dataset: generation renders with it, assembly and checking read it."""
