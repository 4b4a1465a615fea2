"""The checking stage, ``python -m dataset.check OUT`` (``checker``): a generated dataset re-derived
from its files alone. Each row's state replayed from its path and its target no-ops recomputed
(``state_replay``), every claim of its chain-of-thought re-derived from the step and the two
programs (``claims``), every menu row asked again and its pairs rebuilt (``menu_rows``), every kernel row
asked again at its slot's kernel and its answer replayed (``kernel_rows``). Sits
above generation and assembly: it calls their functions to re-derive what they wrote."""
