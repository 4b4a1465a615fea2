"""Which rule files an engine loads, and what a result records about them.

``RuleSources``: the built-in rules (the package's rules/ directory) and any number of rule
folders of the user's own, in order. The schema is the folder ``leir/`` of a rules directory,
its ``SCHEMA_FILES`` loaded in that order (the term schema, the relations guards may use with
their analysis rules, the helper library); it comes from the package, and a folder that holds
its own ``leir/`` is a complete rules directory (a copy of the project's rules/, as
``rules=DIR`` always meant) and replaces the built-in rules, schema included. A folder of the
layout before the schema was split, with one ``leir.egg``, is a complete rules directory too
(a copy of rules/ made then, or a job's recorded rule files). Every other ``*.egg`` file of a
folder is a strategy file, loaded after the built-in ones.

A result (a dataset row, a search trajectory) records the rule files that produced it as
``manifest()``: ``[{"file": NAME, "sha256": HEX}, ...]``, the names relative to their folder
(``leir/terms.egg``, ``math.egg``: never a machine's path). ``difference`` compares two manifests
for the error a replay or a check with other rules gives; a result recorded with the single
``leir.egg`` that was split into ``leir/`` names the split files (``SPLIT_SCHEMAS``).

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

SCHEMA_DIR = "leir"
# the schema's files in load order: each declares what the later ones (and the strategy files) use
SCHEMA_FILES = ("terms.egg", "preconditions.egg", "values.egg", "prefixes.egg", "sets.egg", "indices.egg",
                "padding.egg", "slices.egg", "helpers.egg")
SINGLE_SCHEMA = "leir.egg"          # the schema as one file, before it was split into leir/

# The single leir.egg of main at f008ae2 (sha256) -> the files it was split into, with theirs: the
# same forms, grouped by job. A result recorded with that leir.egg names these files.
SPLIT_SCHEMAS = {
    "aff0577f3a3d5b38607698d67d3f3fff986c6eab3142dcc88b6a1c9038a12337": {
        "leir/terms.egg": "b2a49a62792112e41358724828455e092c6ea64dc9323ca34b54b1fb886ab058",
        "leir/preconditions.egg": "0242fc767e49ca158a16d494c7f49e5410816b0a6d86d4aca3c69bec393eb60e",
        "leir/values.egg": "025bc7f8d7c4e410ba1bab82d96a164c42dd66ee57dd5de66ec4264d23462347",
        "leir/prefixes.egg": "a56a632f53539c46b0d87c956762a868046b4d14ee270a98e162fe6b1227d352",
        "leir/sets.egg": "09bc2dc91d155df5d98038fa28c65664bc83ee9690a2e06dcf5a54ffb9e88902",
        "leir/indices.egg": "ba8c02784f3b6f93b0ca82b9385586815ed17f8a807c5bc18d3f1b51078af28b",
        "leir/padding.egg": "cd01af6378c316234a572df7ee0f0d58969bea23319b6d23af7b676975ceba85",
        "leir/slices.egg": "3ccbb63ae85f4bcf046d19ccfb2946df175bf8cdb9a2e65cfe7c44e3db8c4d81",
        "leir/helpers.egg": "57ea4146dd746d2581e277a0eda4eb488efee7d3cff8da99d38fea802fffe55f",
    },
}


def _rules_dir() -> Path:
    """The project's rules: package data of ``engine.rules`` when installed from a wheel, the
    top-level rules/ directory of the source tree otherwise (a checkout, an editable install)."""
    package = Path(__file__).resolve().parent.parent          # engine/
    installed = package / "rules"
    return installed if (installed / SCHEMA_DIR / SCHEMA_FILES[0]).is_file() else package.parent / "rules"


RULES_DIR = _rules_dir()


def schema_files(folder: Path) -> list[Path] | None:
    """The schema files of a rules folder in load order (None: it holds no schema, it is a
    folder of strategy files): ``leir/``'s ``SCHEMA_FILES``, or the single ``leir.egg``."""
    split, single = folder / SCHEMA_DIR, folder / SINGLE_SCHEMA
    if split.is_dir() and single.is_file():
        raise _error(f"this rules folder holds two schemas, {SCHEMA_DIR}/ and {SINGLE_SCHEMA}: keep one",
                     file=str(folder))
    if single.is_file():
        return [single]
    if not split.is_dir():
        return None
    missing = [n for n in SCHEMA_FILES if not (split / n).is_file()]
    if missing:
        raise _error(f"the schema folder lacks {', '.join(missing)} (a schema folder holds "
                     f"{', '.join(SCHEMA_FILES)})", file=str(split))
    extra = sorted(f.name for f in split.glob("*.egg") if f.name not in SCHEMA_FILES)
    if extra:
        raise _error(f"{extra[0]} is not a schema file (a schema folder holds {', '.join(SCHEMA_FILES)}; "
                     "strategies and the relations of one's own go in the strategy files beside it)",
                     file=str(split / extra[0]))
    return [split / n for n in SCHEMA_FILES]


def file_name(f: Path) -> str:
    """A rule file's name relative to its rules folder: ``leir/terms.egg``, ``math.egg``."""
    f = Path(f)
    return f"{SCHEMA_DIR}/{f.name}" if f.parent.name == SCHEMA_DIR and f.name in SCHEMA_FILES else f.name


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
        """The schema files first, then the strategy files: the built-in ones (name order), then
        each folder's (name order)."""
        schema, strategies = self.split_files()
        return schema + strategies

    def split_files(self) -> tuple[list[Path], list[Path]]:
        """(schema files in load order, strategy files in load order)."""
        folders = []
        for d in self.dirs:
            p = Path(d)
            if p.is_file() and p.suffix == ".egg":       # a rule file names its folder (as before)
                p = p.parent
            if not p.is_dir():
                raise _error(f"no such rules folder: {d}", file=d)
            folders.append(p)
        complete = [(p, s) for p in folders for s in [schema_files(p)] if s]
        if len(complete) > 1:
            raise _error(f"two rules folders hold a schema ({SCHEMA_DIR}/): {complete[0][0]} and {complete[1][0]}; "
                         "only one complete rules directory can be loaded", file=str(complete[1][0]))
        if complete:
            schema, builtin = complete[0][1], False
        else:
            schema, builtin = schema_files(RULES_DIR), self.builtin
            if not schema:
                raise _error(f"no rule schema {SCHEMA_DIR}/ in {RULES_DIR} (the installation lacks its rule files: "
                             "reinstall it)", file=str(RULES_DIR))
        out: list[Path] = []
        for p in ([RULES_DIR] if builtin else []) + folders:
            found = sorted(f for f in p.glob("*.egg") if f.name != SINGLE_SCHEMA)
            if not found and p in folders and schema_files(p) is None:
                raise _error("no rule files (*.egg) in this folder", file=str(p))
            out += found
        seen = {f.resolve() for f in schema}
        return schema, [f for f in out if not (f.resolve() in seen or seen.add(f.resolve()))]

    def to_json(self) -> dict:
        return {"dirs": list(self.dirs), "builtin": self.builtin}

    def bundle(self) -> list[list[list[str]]]:
        """The files' texts, for a process on another machine (a Ray worker): one list of
        [name, text] per folder in load order, the first holding the schema (``unbundle``)."""
        schema, strategies = self.split_files()
        folders: list[list[list[str]]] = [[[file_name(f), f.read_text()] for f in schema]]
        last = None
        for f in strategies:
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
    allowed = {SINGLE_SCHEMA} | {f"{SCHEMA_DIR}/{n}" for n in SCHEMA_FILES}
    for i, folder in enumerate(bundle):
        d = Path(root) / f"{i:03d}"
        for name, text in folder:
            if not (name in allowed or ("/" not in name and name.endswith(".egg") and not name.startswith("."))):
                raise _error(f"the recorded rule files name {name!r}, not a rule file of a rules folder")
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text)
        dirs.append(str(d))
    return RuleSources(tuple(dirs))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest(files: list[Path], texts: dict[str, str]) -> list[dict]:
    """What a result records about the rules: each file's name (``file_name``) and the sha256 of
    its text."""
    return [{"file": file_name(f), "sha256": digest(texts[str(f)])} for f in files]


def _unsplit(m: list[dict]) -> list[dict]:
    """A manifest with a recorded single leir.egg that was split (``SPLIT_SCHEMAS``) replaced by
    the files it was split into."""
    out = []
    for e in m:
        split = SPLIT_SCHEMAS.get(str(e.get("sha256"))) if e.get("file") == SINGLE_SCHEMA else None
        out += [{"file": n, "sha256": h} for n, h in split.items()] if split else [e]
    return out


def difference(recorded: list[dict], current: list[dict]) -> str | None:
    """How the rules loaded now differ from the ones a result records (None: the same files,
    byte for byte), e.g. ``math.egg changed; mine.egg not loaded now``. Load order is not
    compared."""
    def table(m):
        out: dict[str, list[str]] = {}
        for e in m:
            out.setdefault(str(e.get("file")), []).append(str(e.get("sha256")))
        return {k: sorted(v) for k, v in out.items()}
    old, new = table(_unsplit(recorded)), table(current)
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
                        f"folder with its own schema ({SCHEMA_DIR}/) is a complete rules directory and replaces the "
                        "built-in rules (default: the built-in rules only)")
    g.add_argument("--no-builtin-rules", dest="rules", action=_NoBuiltin,
                   help=f"load only the --rules folders (and the package's schema, rules/{SCHEMA_DIR}/)")
