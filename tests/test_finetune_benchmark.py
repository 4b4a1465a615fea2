"""benchmarks/finetune.py asks the model in the search what it was trained on: the data phase's
dataset.generate and every search of the search phase get the same menu options."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def finetune():
    spec = importlib.util.spec_from_file_location("finetune_bench", ROOT / "benchmarks" / "finetune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flag(cmd: list, name: str):
    cmd = [str(c) for c in cmd]
    assert name in cmd, f"{name} missing from {cmd}"
    return cmd[cmd.index(name) + 1]


def test_the_data_and_the_searches_ask_the_same_menu_question(tmp_path, monkeypatch):
    fb = finetune()
    ran = []
    monkeypatch.setattr(fb, "run", lambda cmd, log, env=None: ran.append(cmd))
    args = ["--out", str(tmp_path), "--menu-size", "5", "--prompt-tokens", "900", "--strategies", "paper",
            "--depth", "2", "--walks", "3"]
    parser_seen = {}
    monkeypatch.setattr(fb, "PHASES", {"data": lambda a: parser_seen.setdefault("a", a)})
    assert fb.main([*args, "--phase", "data"]) == 0
    a = parser_seen["a"]
    fb.generate(tmp_path / "src.jsonl", tmp_path / "ds", a)
    gen = ran[-1]
    for policy, url in (("random", None), ("llm", "http://127.0.0.1:1/v1")):
        cmd = fb.search_cmd(tmp_path / "p.json", tmp_path / "t.json", policy, 0, a, url, "tuned" if url else None)
        for name in ("--menu-size", "--prompt-tokens", "--strategies"):
            assert flag(cmd, name) == flag(gen, name), name
        # composites would give random a menu the model never sees (auto turns them off for llm only)
        assert flag(cmd, "--composites") == "off"
    assert (flag(gen, "--depth"), flag(gen, "--walks"), flag(gen, "--strategies")) == ("2", "3", "paper")


def test_the_default_strategies_are_the_searchs():
    from search.features import DEFAULT_STRATEGIES
    fb = finetune()
    seen = {}
    fb.PHASES = {"table": lambda a: seen.setdefault("a", a)}
    fb.main(["--phase", "table"])
    assert seen["a"].strategies == DEFAULT_STRATEGIES
