"""Which rule files an engine loads, and what a result records about them.

``RuleSources``: the built-in rules (the package's rules/ directory) and any number of rule
folders of the user's own, in order. The schema (leir.egg) comes from the package; a folder
that holds its own leir.egg is a complete rules directory (a copy of the project's rules/, as
``rules=DIR`` always meant) and replaces the built-in rules, schema included. Every other
``*.egg`` file of a folder is a strategy file, loaded after the built-in ones.

A result (a dataset row, a search trajectory) records the rule files that produced it as
``manifest()``: ``[{"file": NAME, "sha256": HEX}, ...]``, the names relative to their folder
(never a machine's path). ``difference`` compares two manifests for the error a replay or a
check with other rules gives.

Commands that load rules call ``add_rules_options(parser)``: ``--rules DIR`` (repeatable) and
``--no-builtin-rules``, parsed straight into ``args.rules``, a ``RuleSources`` that
``Engine(rules=args.rules)`` takes. Commands that select strategies call
``add_strategies_option``: ``--strategies`` (documented) or ``--strategy``, repeatable, each a
comma list, parsed into a list of names.
"""
from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

SCHEMA_FILE = "leir.egg"


def _rules_dir() -> Path:
    """The project's rules: package data of ``engine.rules`` when installed from a wheel, the
    top-level rules/ directory of the source tree otherwise (a checkout, an editable install)."""
    package = Path(__file__).resolve().parent.parent          # engine/
    installed = package / "rules"
    return installed if (installed / SCHEMA_FILE).is_file() else package.parent / "rules"


RULES_DIR = _rules_dir()


def _error(msg: str, file=None):
    from engine.leir.diagnostics import LeirError
    return LeirError(msg, file=file)


@dataclass(frozen=True)
class RuleSources:
    """The built-in rules (unless ``builtin`` is False) and the user's folders, in order."""

    dirs: tuple[str, ...] = ()
    builtin: bool = True

    @classmethod
    def of(cls, rules) -> "RuleSources":
        """None (the built-in rules), a folder, a list of folders, or a RuleSources."""
        if rules is None:
            return cls()
        if isinstance(rules, RuleSources):
            return rules
        if isinstance(rules, (str, Path)):
            return cls((str(rules),))
        return cls(tuple(str(r) for r in rules))

    def files(self) -> list[Path]:
        """The schema first, then the strategy files: the built-in ones (name order), then each
        folder's (name order)."""
        folders = []
        for d in self.dirs:
            p = Path(d)
            if p.is_file() and p.suffix == ".egg":       # a rule file names its folder (as before)
                p = p.parent
            if not p.is_dir():
                raise _error(f"no such rules folder: {d}", file=d)
            folders.append(p)
        complete = [p for p in folders if (p / SCHEMA_FILE).is_file()]
        if len(complete) > 1:
            raise _error(f"two rules folders hold a schema ({SCHEMA_FILE}): {complete[0]} and {complete[1]}; "
                         "only one complete rules directory can be loaded", file=str(complete[1]))
        if complete:
            schema, builtin = complete[0] / SCHEMA_FILE, False
        else:
            schema, builtin = RULES_DIR / SCHEMA_FILE, self.builtin
            if not schema.is_file():
                raise _error(f"no rule schema {SCHEMA_FILE} in {RULES_DIR} (the installation lacks its rule files: "
                             "reinstall it)", file=str(RULES_DIR))
        out = [schema]
        for p in ([RULES_DIR] if builtin else []) + folders:
            found = sorted(f for f in p.glob("*.egg") if f.name != SCHEMA_FILE)
            if not found and p in folders and not (p / SCHEMA_FILE).is_file():
                raise _error("no rule files (*.egg) in this folder", file=str(p))
            out += found
        seen: set = set()
        return [f for f in out if not (f.resolve() in seen or seen.add(f.resolve()))]

    def to_json(self) -> dict:
        return {"dirs": list(self.dirs), "builtin": self.builtin}

    def bundle(self) -> list[list[list[str]]]:
        """The files' texts, for a process on another machine (a Ray worker): one list of
        [name, text] per folder in load order, the first holding the schema (``unbundle``)."""
        files = self.files()
        folders: list[list[list[str]]] = [[[SCHEMA_FILE, files[0].read_text()]]]
        last = None
        for f in files[1:]:
            if last is not None and f.parent != last:
                folders.append([])
            folders[-1].append([f.name, f.read_text()])
            last = f.parent
        return folders

    @classmethod
    def from_json(cls, d: dict | None) -> "RuleSources":
        return cls() if d is None else cls(tuple(d.get("dirs", ())), bool(d.get("builtin", True)))


def unbundle(bundle: list, root: str | Path) -> RuleSources:
    """Write a ``bundle`` under ``root`` (one folder per bundled folder; the first, with the
    schema, is a complete rules directory): the same files, in the same load order."""
    dirs = []
    for i, folder in enumerate(bundle):
        d = Path(root) / f"{i:03d}"
        d.mkdir(parents=True, exist_ok=True)
        for name, text in folder:
            (d / name).write_text(text)
        dirs.append(str(d))
    return RuleSources(tuple(dirs))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest(files: list[Path], texts: dict[str, str]) -> list[dict]:
    """What a result records about the rules: each file's name and the sha256 of its text."""
    return [{"file": Path(f).name, "sha256": digest(texts[str(f)])} for f in files]


def difference(recorded: list[dict], current: list[dict]) -> str | None:
    """How the rules loaded now differ from the ones a result records (None: the same files,
    byte for byte), e.g. ``math.egg changed; mine.egg not loaded now``. Load order is not
    compared."""
    def table(m):
        out: dict[str, list[str]] = {}
        for e in m:
            out.setdefault(str(e.get("file")), []).append(str(e.get("sha256")))
        return {k: sorted(v) for k, v in out.items()}
    old, new = table(recorded), table(current)
    parts = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            parts.append(f"{name} not loaded now")
        elif name not in old:
            parts.append(f"{name} loaded now but not recorded")
        elif old[name] != new[name]:
            parts.append(f"{name} changed")
    return "; ".join(parts) or None


def check_same_rules(recorded, current: list[dict], what: str) -> None:
    """Raise a one-line error naming the difference when ``recorded`` (a manifest, or None for
    a result that records none) is not the loaded rules ``current``."""
    if recorded is None:
        return
    diff = difference(recorded, current)
    if diff:
        raise _error(f"{what} was made with other rule files than the ones loaded now ({diff}); load the same "
                     "rules (--rules DIR, --no-builtin-rules)")


# ------------------------------------------------------------------ command-line options


class _AddFolder(argparse.Action):
    def __call__(self, parser, namespace, value, option_string=None):
        if not Path(value).exists():
            parser.error(f"{option_string} {value}: no such folder")
        cur = getattr(namespace, self.dest) or RuleSources()
        setattr(namespace, self.dest, replace(cur, dirs=cur.dirs + (value,)))


class _NoBuiltin(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, value, option_string=None):
        cur = getattr(namespace, self.dest) or RuleSources()
        setattr(namespace, self.dest, replace(cur, builtin=False))


class _AddStrategies(argparse.Action):
    def __call__(self, parser, namespace, value, option_string=None):
        items = [t.strip() for t in value.split(",") if t.strip()]
        if not items:
            parser.error(f"{option_string}: expected a strategy name or set, got {value!r}")
        setattr(namespace, self.dest, (getattr(namespace, self.dest) or []) + items)


def add_strategies_option(parser, help: str) -> None:
    """``--strategies S`` (also spelt ``--strategy``; repeatable, each a comma list of strategy
    names and sets) into ``args.strategies``: a list, or None when not given."""
    parser.add_argument("--strategies", "--strategy", dest="strategies", metavar="S", action=_AddStrategies,
                        default=None, help=help + "; a comma list, repeatable (--strategy is the same flag)")


def add_rules_options(parser: argparse.ArgumentParser) -> None:
    """``--rules DIR`` (repeatable) and ``--no-builtin-rules`` on a command that loads rules;
    after parsing, ``args.rules`` is the ``RuleSources`` to load (``Engine(rules=args.rules)``)."""
    g = parser.add_argument_group("rules")
    g.add_argument("--rules", metavar="DIR", action=_AddFolder, default=RuleSources(),
                   help="a folder of your own rule files (*.egg), loaded after the built-in rules; repeatable. A "
                        f"folder with its own {SCHEMA_FILE} is a complete rules directory and replaces the built-in "
                        "rules (default: the built-in rules only)")
    g.add_argument("--no-builtin-rules", dest="rules", action=_NoBuiltin,
                   help=f"load only the --rules folders (and the package's schema, {SCHEMA_FILE})")
