"""``python -m dataset.evaluate DATASET --endpoint URL --model NAME``: the paper's single-step
evaluation of a served model on a generated dataset (its test split by default).

Each prompt is sent to an OpenAI-compatible endpoint from ``--concurrency`` threads (a batching
server answers them together); the answers are judged in this thread, in the dataset's order
(``dataset.evaluate.judge``: parsed, never executed; checked against the known tensors; built, run
and compared in 3 trials), and each prompt's judged result is committed to a journal, once,
atomically. Killed at any moment (``kill -9``) and run again, the job asks only the prompts
not yet journalled and ends with the same results as an uninterrupted run. Results:
``OUT/results.json``, ``OUT/results.md`` and ``OUT/results.png``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.leir.diagnostics import LeirError

FORMAT = "leir-model-evaluation"
# the constraint forms whose answer is one number: a menu row's prompt asks for "its number only"
NUMBER_MODES = ("auto", "choice", "regex", "grammar", "none")
SYSTEM_PROMPT = "You are a helpful assistant."        # the training system prompt (spec dataset.md 7)
EPILOG = """examples:
  python -m dataset.evaluate out/examples --endpoint http://localhost:8000/v1 --model Qwen/Qwen3-8B
  python -m dataset.evaluate out/examples --endpoint http://localhost:8080/v1 --model smollm2 --attempts 4 --concurrency 8
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m dataset.evaluate", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Evaluate a served model on a generated dataset: single-step pass "
                                             "ladder (Diff/Build/Exec/Equal), pass@k, strategies chosen; menu "
                                             "prompts: valid answers, agreement with the fastest step, regret.")
    ap.add_argument("dataset", help="a folder made by python -m dataset.generate")
    ap.add_argument("--endpoint", required=True, help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    ap.add_argument("--model", required=True, help="model name as the server knows it")
    ap.add_argument("-o", "--output", help="results folder (default DATASET/eval-MODEL; resumable)")
    ap.add_argument("--split", default="test", help="test (default), train or all")
    ap.add_argument("--kind", choices=("all", "single", "menu"), default="all",
                    help="which prompts: single-step, menu, or all (default) that the dataset has")
    ap.add_argument("--attempts", type=int, default=1, help="answers per single-step prompt: pass@1 and pass@k "
                                                            "(default 1, as the paper's Table 2)")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    ap.add_argument("--limit", type=int, help="only the first N prompts (in dataset order)")
    g = ap.add_argument_group("model")
    g.add_argument("--temperature", type=float, help="default 0 with one attempt (the paper), 0.7 with more")
    g.add_argument("--max-tokens", type=int, default=4096)
    g.add_argument("--seed", type=int, default=0, help="sampling seed sent with every request (default 0)")
    g.add_argument("--system-prompt", default=SYSTEM_PROMPT,
                   help=f"for rows without one (default: the training prompt, {SYSTEM_PROMPT!r})")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    g.add_argument("--constraint", default="auto", choices=NUMBER_MODES,
                   help="menu prompts: how the answer is tied to the menu numbers, the search's machinery "
                        "(search.constraint): auto (default) tries choice (vLLM), regex (SGLang), grammar (llama.cpp) "
                        "and keeps the first form the server accepts and follows; none sends no constraint")
    g.add_argument("--answer", choices=("number", "rank"), default="number",
                   help="menu prompts: number (default): the model's answer is read as a menu number; rank: every "
                        "entry's number is scored by its log-probability (search.rank) and the best-scored one is the "
                        "answer, the whole ranking scored too")
    g.add_argument("--scorer", default="server",
                   help="with --answer rank: server (the endpoint's log-probabilities, default) or local:PATH (a "
                        "model file, transformers)")
    g.add_argument("--llm-timeout", type=float, default=300.0, help="seconds per request (default 300)")
    g.add_argument("--retries", type=int, default=4, help="retries on 429/5xx/timeouts (default 4)")
    v = ap.add_argument_group("verification")
    v.add_argument("--trials", type=int, default=3, help="seeded trials per answer (default 3)")
    v.add_argument("--target", choices=("llvm", "cuda"), default="llvm")
    v.add_argument("--tolerance", choices=("strict", "exact"), default="strict",
                   help="strict: the dtype-aware bound (default); exact: bitwise, as the prompt asks")
    v.add_argument("--timeout", type=float, default=300.0, help="seconds per build/run (default 300)")
    o = ap.add_argument_group("output")
    o.add_argument("--no-plot", action="store_true", help="do not draw OUT/results.png")
    o.add_argument("--no-baselines", action="store_true",
                   help="menu prompts: compare the model with random choice only (no fixed positions, strategy "
                        "prior or shipped cost model)")
    o.add_argument("--train-data", nargs="+", metavar="DIR",
                   help="menu prompts: dataset folders whose training split gives the strategy prior's mean speedup "
                        "per strategy (default: this dataset's own training split when --split test is evaluated)")
    o.add_argument("--json", action="store_true", help="print results.json's metrics on stdout")
    o.add_argument("--restart", action="store_true", help="discard the journal of an earlier run in OUT")
    from engine.rewrite.rule_sources import add_rules_options
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    return say_defaults(ap)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "model"


def task_id(item: dict) -> str:
    text = json.dumps([item["kind"], item["id"], item["messages"]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def request_seed(seed: int, item: dict, round_: int) -> int:
    return int(hashlib.sha256(f"{seed}:{item['kind']}:{item['id']}:{round_}".encode()).hexdigest()[:8], 16) >> 1


def options_of(a) -> dict:
    temperature = a.temperature if a.temperature is not None else (0.0 if a.attempts == 1 else 0.7)
    opts = {"model": a.model, "split": a.split, "kind": a.kind, "attempts": a.attempts, "temperature": temperature,
            "max_tokens": a.max_tokens, "seed": a.seed, "system_prompt": a.system_prompt, "trials": a.trials,
            "target": a.target, "tolerance": a.tolerance, "constraint": a.constraint}
    # a ranked run's answers are other answers (a folder's journal of numbers is not resumed as ranked)
    return opts | ({"answer": "rank", "scorer": a.scorer} if a.answer == "rank" else {})


def menu_parts(form, item: dict) -> dict:
    """The request fields that tie a menu prompt's answer to its numbers in ``form``."""
    return form.menu(list(range(1, len(item["menu"]) + 1)), 1) if form is not None else {}


def ask(client, item: dict, opts: dict, form=None, ranker=None) -> dict:
    """The answers to one prompt: ``attempts`` for a single prompt, one for a menu (constrained
    to its numbers in ``form``, a ``search.constraint.Form``; with ``ranker``, its entries'
    scores, ``dataset.evaluate.rank_answers``); answers a server did not return (one ignoring
    ``n``) are asked for again, up to ``attempts`` rounds."""
    if ranker is not None and item["kind"] == "menu":
        return ranker.ask(item)
    want = opts["attempts"] if item["kind"] == "single" else 1
    parts = menu_parts(form, item) if item["kind"] == "menu" else {}
    texts, usage, error = [], {"prompt_tokens": 0, "completion_tokens": 0}, None
    for round_ in range(want):
        res = client.chat(item["messages"], n=want - len(texts), temperature=opts["temperature"],
                          max_tokens=opts["max_tokens"], seed=request_seed(opts["seed"], item, round_),
                          extra_body=parts.get("extra_body"), response_format=parts.get("response_format"))
        if res.error is not None:
            error = res.error
            break
        texts += list(res.texts)[:want - len(texts)]
        for k in usage:
            usage[k] += int((res.usage or {}).get(k) or 0)
        if len(texts) >= want:
            break
    if len(texts) < want and error is None:
        error = {"type": "missing answers", "status": None, "message": f"{len(texts)} of {want} answers came back"}
    return {"texts": texts, "usage": usage, "error": error}


def negotiate(client, item: dict, opts: dict):
    """The constraint form of the run's menu prompts (``search.constraint.Negotiator``, number
    forms only): ``auto`` asks ``item`` in each form in turn and keeps the first the server
    accepts (no validation error) and follows (the answer is a menu number). Returns (form, the
    negotiation's record)."""
    from search.constraint import FORM, Negotiator, in_menu_form
    neg = Negotiator(opts["constraint"], "menu")
    numbers = list(range(1, len(item["menu"]) + 1))
    while True:
        forms = [f for f in neg.candidates() if f.name in NUMBER_MODES and f.name not in
                 {t["form"] for t in neg.tried}] or [FORM["none"]]
        form = forms[0]
        if neg.settled or form.name == "none":
            return form, neg.state() | {"kept": form.name}
        res = ask(client, item, dict(opts, attempts=1), form)
        err = res["error"]
        if err is not None and not err.get("validation"):       # a server fault, not a refusal: nothing learnt
            if err["type"] == "APIConnectionError":
                raise LeirError(f"cannot reach the endpoint: {err['message'][:120]} (is the server running?)")
            raise LeirError(f"the endpoint failed on the first menu prompt ({err['type']}: {err['message'][:160]}); "
                            "run the same command again")
        if err is not None:
            neg.note(form, "rejected", None, f"HTTP {err.get('status')}: {err.get('message')}")
        elif not in_menu_form(form, res["texts"][0], numbers, 1):
            neg.note(form, "ignored", None, f"answer not in the form: {res['texts'][0][:200]!r}")
        else:
            neg.note(form, "accepted", None)
            return form, neg.state()


def judge(item: dict, answers: dict, single_judge, form=None) -> dict:
    from engine.leir.files import program_from_json

    from .judge import judge_menu
    base = {"kind": item["kind"], "id": item["id"], "usage": answers["usage"]}
    if item["kind"] == "menu" and "scores" in answers:
        from .rank_answers import judge_ranked
        return base | judge_ranked(item, answers["scores"])
    if item["kind"] == "menu":
        from search.constraint import in_menu_form
        text = answers["texts"][0]
        # an answer outside the form the server was asked in: it did not enforce the constraint
        in_form = form is None or in_menu_form(form, text, list(range(1, len(item["menu"]) + 1)), 1)
        return base | judge_menu(text, item) | {"in_form": in_form}
    original = program_from_json(item["program"])
    return base | {"strategy": item["strategy"], "category": item["category"], "bucket": item["bucket"],
                   "attempts": [single_judge.judge(t, original) for t in answers["texts"]]}


def summarize(job: dict, results: list[dict], unfinished: int, baselines=None, comparison=None) -> dict:
    from .metrics import menu_metrics, single_metrics
    single = [r for r in results if r["kind"] == "single"]
    menu = [r for r in results if r["kind"] == "menu"]
    menu_summary = menu_metrics(menu) if menu else None
    if menu_summary is not None and baselines is not None:
        menu_summary["baselines"] = baselines
    if menu_summary is not None and comparison is not None:
        menu_summary["comparison"] = comparison
    tokens = {k: sum(r["usage"].get(k, 0) for r in results) for k in ("prompt_tokens", "completion_tokens")}
    return {"format": FORMAT, "version": 1, "job": job,
            "single": single_metrics(single, job["attempts"]) if single else None,
            "menu": menu_summary,
            "tokens": tokens | {"prompt_tokens_per_prompt": round(tokens["prompt_tokens"] / len(results), 1)
                                if results else None},
            "unfinished": unfinished, "prompts": results}


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from search.client import check_endpoint, check_url
    a = parser().parse_args(argv)
    check_url(a.endpoint)
    if a.answer == "rank":
        from search.scorers import parse_scorer
        parse_scorer(a.scorer)
    elif a.scorer != "server":
        raise LeirError("--scorer is how --answer rank scores entries: use it with --answer rank")
    for name, val in (("--attempts", a.attempts), ("--concurrency", a.concurrency), ("--trials", a.trials),
                      ("--max-tokens", a.max_tokens), ("--limit", a.limit if a.limit is not None else 1)):
        if val < 1:
            raise LeirError(f"{name} must be at least 1, got {val}")
    if a.retries < 0 or a.timeout <= 0 or a.llm_timeout <= 0:
        raise LeirError("--retries must be at least 0 and timeouts positive")
    for folder in a.train_data or []:
        if not Path(folder).is_dir():
            raise LeirError("no such dataset folder (--train-data)", file=folder)
    from .items import load_items
    items = [it for it in load_items(a.dataset, a.split, a.system_prompt) if a.kind in ("all", it["kind"])]
    if a.limit is not None:
        items = items[:a.limit]
    if not items:
        raise LeirError(f"no {'' if a.kind == 'all' else a.kind + ' '}prompts in split '{a.split}' of this dataset",
                        file=a.dataset)
    check_endpoint(a.endpoint, a.model, api_key_env=a.api_key_env, timeout=min(a.llm_timeout, 30.0))
    return run(a, items)


def run(a, items: list[dict]) -> int:
    from engine.leir.files import write_atomic
    from search.client import ChatClient

    from .scorecard import markdown, plot
    from ..journal import Journal
    from ..progress import Progress
    out = Path(a.output) if a.output else Path(a.dataset) / f"eval-{_slug(a.model)}"
    out.mkdir(parents=True, exist_ok=True)
    opts = options_of(a)
    journal = Journal(out)
    journal.open(opts, restart=a.restart)
    journal.clean_partial()
    ids = [task_id(it) for it in items]
    pending = [(tid, it) for tid, it in zip(ids, items) if not journal.done(tid)]
    client = ChatClient(a.endpoint, a.model, api_key_env=a.api_key_env, timeout=a.llm_timeout, retries=a.retries,
                        seed=a.seed)
    single_judge, verifier = None, None
    if any(it["kind"] == "single" for _, it in pending):
        from lowering import Verifier

        from .judge import SingleJudge
        verifier = Verifier(target=a.target, trials=a.trials, timeout=a.timeout, seed=a.seed,
                            log=str(journal.root / "workers.log"))
        single_judge = SingleJudge(verifier, a.tolerance, rules=a.rules)
    form, negotiation, ranker = None, None, None
    saved = journal.root / "negotiation.json"
    ranked = journal.root / "ranking.json"
    if a.answer == "rank" and any(it["kind"] == "menu" for it in items):
        from search.scorers import make_scorer

        from .rank_answers import MenuRanker
        resume = json.loads(ranked.read_text()) if ranked.exists() else None
        ranker = MenuRanker(make_scorer(a.scorer, client=client, seed=a.seed, resume=resume))
    elif any(it["kind"] == "menu" for it in items):
        from search.constraint import FORM
        if saved.exists():                      # the form of the run this journal belongs to
            negotiation = json.loads(saved.read_text())
        elif any(it["kind"] == "menu" for _, it in pending):
            _, negotiation = negotiate(client, next(it for _, it in pending if it["kind"] == "menu"), opts)
            write_atomic(saved, json.dumps(negotiation) + "\n")
        if negotiation is not None:
            form = FORM[negotiation["kept"]]
    bar = Progress(total=len(items), done=len(items) - len(pending), unit="prompt", desc="evaluate")
    unfinished, answered = 0, False
    try:
        with ThreadPoolExecutor(a.concurrency) as pool:
            todo, window = iter(pending), deque()

            def feed():
                while len(window) < 2 * a.concurrency:
                    nxt = next(todo, None)
                    if nxt is None:
                        return
                    window.append((nxt, pool.submit(ask, client, nxt[1], opts, form, ranker)))
            feed()
            while window:
                (tid, item), fut = window.popleft()
                answers = fut.result()
                if answers["error"] is not None:
                    err = answers["error"]
                    if not answered and err["type"] == "APIConnectionError":
                        for _, f in window:
                            f.cancel()
                        raise LeirError(f"cannot reach the endpoint {a.endpoint}: {err['message'][:120]} "
                                        "(is the server running?)")
                    if err.get("unsupported"):
                        for _, f in window:
                            f.cancel()
                        raise LeirError(f"--answer rank: {err['message'][:300]}")
                    unfinished += 1
                    print(f"{item['kind']} prompt {item['id']}: no answer ({err['type']}: {err['message'][:160]})",
                          file=sys.stderr)
                else:
                    answered = True
                    journal.commit(tid, judge(item, answers, single_judge, form))
                bar.advance(unanswered=unfinished)
                feed()
    finally:
        bar.close()
        if verifier is not None:
            verifier.close()
        if ranker is not None:
            write_atomic(ranked, json.dumps(ranker.state()) + "\n")
    job = {"dataset": Path(a.dataset).resolve().name, **opts,
           "prompts": len(items), "limit": a.limit}
    if negotiation is not None:
        job["constraint_kept"] = negotiation["kept"]
    if ranker is not None:
        job["rank_form"] = ranker.state().get("kept")
    results = [journal.load(tid) for tid in ids if journal.done(tid)]
    menus = [it for it in items if it["kind"] == "menu"]
    baselines, comparison = compare_menus(a, menus, results) if menus else (None, None)
    summary = summarize(job, results, unfinished, baselines, comparison)
    write_atomic(out / "results.json", json.dumps(summary, indent=1) + "\n")
    write_atomic(out / "results.md", markdown(summary))
    if not a.no_plot:
        tmp = out / ".results.png.tmp.png"
        if plot(summary, tmp):
            tmp.replace(out / "results.png")
    if a.json:
        print(json.dumps({k: summary[k] for k in ("single", "menu", "tokens", "unfinished")}, indent=1))
    else:
        print(_headline(summary, out))
    if unfinished:
        print(f"{unfinished} prompt(s) got no answer; run the same command again to ask them again", file=sys.stderr)
        return 1
    return 0


def compare_menus(a, menus: list[dict], results: list[dict]) -> tuple[dict | None, dict]:
    """(results.json's ``menu.baselines``: random and the cost model on every menu, None with
    --no-baselines; ``menu.comparison``: every chooser on the answered menus that can tell
    choosers apart, ``dataset.evaluate.comparison``)."""
    from .baselines import (baselines, cost_model_rankings, dataset_strategies, position_choosers,
                            ranking_chooser)
    from .comparison import RANDOM, compare
    from .menu_facts import Pick, menu_facts
    from .metrics import menu_metrics
    judged = {r["id"]: r for r in results if r["kind"] == "menu"}
    asked = [it for it in menus if it["id"] in judged]
    facts = [menu_facts(it) for it in asked]
    others: dict = {"random": RANDOM}
    old, notes = None, {}
    if not a.no_baselines:
        others |= position_choosers(facts)
        folders = a.train_data or ([a.dataset] if a.split == "test" else None)
        if folders is None:
            others["strategy prior"] = {"unavailable": f"--split {a.split} evaluates training menus: give the "
                                                       "training datasets with --train-data"}
        else:
            from .strategy_prior import load_prior
            prior, notes["strategy prior"] = load_prior(folders)
            others["strategy prior"] = ({"unavailable": notes["strategy prior"]} if prior is None else
                                        ranking_chooser([prior.ranking(f.strategies) for f in facts]))
        strategies = dataset_strategies(a.dataset) or sorted({e.get("strategy") for it in menus for e in it["menu"]
                                                              if e.get("strategy")})
        ranked = cost_model_rankings(menus, a.target, a.rules, strategies)
        old = baselines(menus, a.target, a.seed, a.rules, strategies, ranked)
        rankings, notes["cost model"] = ranked
        if rankings is None:
            others["cost model"] = {"unavailable": notes["cost model"]}
        else:
            by_id = dict(zip((it["id"] for it in menus), rankings))
            others["cost model"] = ranking_chooser([by_id[it["id"]] for it in asked])
    model = a.model if a.model not in others else f"{a.model} (model)"
    # a judged answer that ranks every entry (a log-probability ranking) carries "ranking": scored as a ranker too
    picks = [Pick(judged[it["id"]]["chosen"], tuple(judged[it["id"]].get("ranking") or ()) or None) for it in asked]
    comparison = compare(facts, {model: picks, **others}, a.seed)
    for name, note in notes.items():
        if "unavailable" not in comparison["choosers"][name]:
            comparison["choosers"][name]["note"] = note
    left = [judged[f.id] for f in facts if f.left_out is not None]
    comparison |= {"model": model, "left_out_model": menu_metrics(left) if left else None}
    return old, comparison


def _headline(summary: dict, out: Path) -> str:
    parts = []
    s, m = summary["single"], summary["menu"]
    if s:
        o = s["overall"]
        k = summary["job"]["attempts"]
        parts.append(f"{o['prompts']} single prompts: diff {o['diff']:.1%} build {o['build']:.1%} exec "
                     f"{o['exec']:.1%} equal {o['equal']:.1%}, pass@1 {o['pass@1']:.1%}"
                     + (f" pass@{k} {o[f'pass@{k}']:.1%}" if k > 1 else ""))
    if m:
        parts.append(f"{m['prompts']} menu prompts: valid {m['valid_rate']:.1%} agreement {m['agreement']:.1%} "
                     f"regret {m['mean_regret'] if m['mean_regret'] is not None else '-'}")
        c = m.get("comparison")
        if c and c["menus"]:
            me, rnd = c["choosers"][c["model"]], c["choosers"]["random"]
            parts.append(f"{c['menus']} menus that tell choosers apart: top-1 {me['top1']:.1%} (random "
                         f"{rnd['top1']:.1%}), geo-mean regret {me['geo_regret']:.3f} (random {rnd['geo_regret']:.3f})")
    return "; ".join(parts) + f" -> {out}/results.md"

