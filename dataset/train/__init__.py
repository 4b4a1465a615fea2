"""The training stage, ``python -m dataset.train`` (``trainer``: SFT, then optionally DPO, with TRL;
resumable checkpoints). Its examples come from generated datasets' menu rows and pairs
(``training_examples``), its base model from a Hugging Face folder or a GGUF file (``base_model``); it logs
each step (``step_log``) and writes the tuned model as GGUF (``gguf_export``). The top stage: it
reads files the other stages wrote and imports none of them."""
