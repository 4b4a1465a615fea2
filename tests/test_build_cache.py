"""The on-disk build cache (lowering/build_cache.py): a cached build runs bit for bit as a fresh one,
a corrupt or foreign entry is rebuilt, concurrent writers leave only valid entries, the folder
stays under its bound (the Verifier's workers and their folder: tests/test_batch_build.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import EXAMPLES, ROOT


@pytest.fixture
def fresh_cache(tmp_path, tvm):
    """This process's build cache in an empty folder, and no builds in memory; the cache is
    switched off again afterwards (other tests keep the environment's)."""
    from lowering import build_cache
    from lowering.run import clear_build_cache
    clear_build_cache()
    cache = build_cache.configure(tmp_path / "builds")
    yield cache
    build_cache.reset()
    clear_build_cache()


def _examples():
    from engine import load_program
    return [load_program(p) for p in sorted(EXAMPLES.glob("*.leir"))]


def _outputs(program):
    from lowering.inputs import random_inputs
    from lowering.run import build, run_built
    return run_built(build(program), program, random_inputs(program, 0, 0))


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])        # bitwise (NaN where NaN)


def test_cached_builds_run_bit_for_bit_as_fresh_builds(fresh_cache):
    from lowering import build_cache
    from lowering.run import clear_build_cache
    progs = _examples()
    build_cache.configure(False)
    fresh = [_outputs(p) for p in progs]
    cache = build_cache.configure(fresh_cache.folder)
    clear_build_cache()
    stored = [_outputs(p) for p in progs]                 # misses: built, stored, run from the library
    assert cache.counts["stored"] == len(progs) and cache.counts["hit"] == 0
    cache = build_cache.configure(fresh_cache.folder)     # another process's view: nothing loaded yet
    clear_build_cache()
    loaded = [_outputs(p) for p in progs]
    assert cache.counts["hit"] == len(progs) and cache.counts["rejected"] == 0
    for a, b, c in zip(fresh, stored, loaded):
        _same(a, b)
        _same(a, c)


def _one_entry(cache, program):
    from lowering.run import build, clear_build_cache
    clear_build_cache()
    build(program)
    (entry,) = cache.folder.glob("*.json")
    meta = json.loads(entry.read_text())
    return entry, meta, cache.folder / meta["library"]


def test_a_corrupt_library_is_rebuilt(fresh_cache):
    from engine import load_program
    from lowering import build_cache
    from lowering.run import clear_build_cache
    prog = load_program(EXAMPLES / "softmax.leir")
    want = _outputs(prog)
    entry, meta, lib = _one_entry(fresh_cache, prog)
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = lib.with_name("corrupt")          # a new file in its place: this process has the library mapped
    bad.write_bytes(bytes(data))
    os.replace(bad, lib)
    cache = build_cache.configure(fresh_cache.folder)
    clear_build_cache()
    _same(want, _outputs(prog))
    assert cache.counts["rejected"] == 1 and cache.counts["stored"] == 1
    assert lib.read_bytes() != bytes(data)                 # the rebuilt library replaced the corrupt one
    cache = build_cache.configure(fresh_cache.folder)
    clear_build_cache()
    _same(want, _outputs(prog))
    assert cache.counts["hit"] == 1 and cache.counts["rejected"] == 0


@pytest.mark.parametrize("damage", ["garbage", "foreign", "missing library", "wrong symbol"])
def test_a_bad_entry_is_rebuilt_never_used(fresh_cache, damage):
    from engine import load_program
    from lowering import build_cache
    from lowering.run import clear_build_cache
    prog = load_program(EXAMPLES / "matmul.leir")
    want = _outputs(prog)
    entry, meta, lib = _one_entry(fresh_cache, prog)
    if damage == "garbage":
        entry.write_text("{not json")
    elif damage == "foreign":          # another TVM's build under this key
        meta["material"]["tvm"] = "0.0.0"
        entry.write_text(json.dumps(meta))
    elif damage == "missing library":
        lib.unlink()
    else:
        meta["symbol"] = "not_there"
        entry.write_text(json.dumps(meta))
    cache = build_cache.configure(fresh_cache.folder)
    clear_build_cache()
    _same(want, _outputs(prog))
    assert cache.counts["hit"] == 0 and cache.counts["stored"] == 1
    _valid(entry)


def _valid(entry) -> None:
    """The entry's library is there with the bytes it names, and its symbol is in it."""
    import hashlib

    import tvm
    meta = json.loads(entry.read_text())
    if "error" in meta:
        return
    lib = entry.parent / meta["library"]
    assert hashlib.sha256(lib.read_bytes()).hexdigest() == meta["sha256"]
    tvm.runtime.load_module(str(lib)).get_function(meta["symbol"])


FILL = """
import json, sys
from engine.leir.files import program_from_json
from lowering.run import build
for line in open(sys.argv[1]):
    build(program_from_json(json.loads(line)))
"""


def _state(engine, name: str, n: int) -> list:
    """An example and ``n`` of its one-step rewrites."""
    from engine import load_program
    p = load_program(EXAMPLES / f"{name}.leir")
    return [p] + [s.program for s in sorted(engine.enumerate(p), key=lambda s: s.key)[:n]]


def test_two_processes_filling_one_cache_leave_it_valid(fresh_cache, engine, tmp_path):
    from lowering import build_cache
    from lowering.run import clear_build_cache
    progs = _state(engine, "softmax", 3)
    listing = tmp_path / "programs.jsonl"
    listing.write_text("".join(json.dumps(p.to_json()) + "\n" for p in progs))
    env = {**os.environ, build_cache.ENV: str(fresh_cache.folder), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", FILL, str(listing)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "build cache" not in err                  # neither writer gave up on the cache
    for entry in fresh_cache.folder.glob("*.json"):
        _valid(entry)
    assert not [f for f in os.listdir(fresh_cache.folder) if f.startswith(".")]     # no temporary left
    build_cache.configure(False)
    fresh = [_outputs(p) for p in progs]
    cache = build_cache.configure(fresh_cache.folder)
    clear_build_cache()
    for p, want in zip(progs, fresh):
        _same(want, _outputs(p))
    assert cache.counts == {"hit": len(progs), "miss": 0, "stored": 0, "rejected": 0}


def test_the_folder_stays_under_its_bound(fresh_cache, engine):
    from lowering import build_cache
    from lowering.run import build
    prog, *neighbours = _state(engine, "softmax", 5)
    build(prog)
    one = sum(f.stat().st_size for f in fresh_cache.folder.iterdir())
    first = {f.name for f in fresh_cache.folder.iterdir()}
    cache = build_cache.configure(fresh_cache.folder, 2.5 * one / 2 ** 20)     # room for two and a half builds
    for n in neighbours:
        build(n)
        assert sum(f.stat().st_size for f in fresh_cache.folder.iterdir()) <= cache.max_bytes
    assert cache.counts["stored"] == 5
    left = {f.name for f in fresh_cache.folder.iterdir()}
    assert not first & left and 2 <= len(left) <= 4                  # the oldest went, the newest stayed


def test_settings_from_the_environment(monkeypatch, tmp_path):
    from engine.leir.diagnostics import LeirError
    from lowering import build_cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(build_cache.ENV, raising=False)
    monkeypatch.delenv(build_cache.SIZE_ENV, raising=False)
    assert build_cache.settings() == (tmp_path / "leir-engine" / "builds", build_cache.DEFAULT_MB * 2 ** 20)
    monkeypatch.setenv(build_cache.ENV, "off")
    assert build_cache.settings()[0] is None
    assert build_cache.settings(str(tmp_path / "x"))[0] == tmp_path / "x"   # an explicit folder wins
    assert build_cache.settings(False)[0] is None
    assert build_cache.configure("off", 64) is None and build_cache.active() is None     # a worker told "off"
    build_cache.reset()
    monkeypatch.setenv(build_cache.SIZE_ENV, "lots")
    with pytest.raises(LeirError, match="LEIR_BUILD_CACHE_MB must be a size in MiB"):
        build_cache.settings()


def test_the_command_shows_and_clears_the_cache(tmp_path):
    env = {**os.environ, "LEIR_BUILD_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    (tmp_path / "x.json").write_text("{}")
    r = subprocess.run([sys.executable, "-m", "lowering.build_cache"], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0 and "1 entries" in r.stdout
    r = subprocess.run([sys.executable, "-m", "lowering.build_cache", "--clear"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "0 entries" in r.stdout and not list(tmp_path.iterdir())
    env["LEIR_BUILD_CACHE_MB"] = "-3"
    r = subprocess.run([sys.executable, "-m", "lowering.build_cache"], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == "error: the build cache's size bound must be positive, got -3.0 MiB"
