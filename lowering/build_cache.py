"""The on-disk cache of compiled llvm programs, shared by every process, job and search of a user.

A build is identified by the sha256 of everything that decides its machine code (``material``):
the lowered TVMScript text, the TVM target (CPU and attributes), the pass options, the host, the
TVM and LLVM versions, the lowering's ``BUILD_VERSION`` and this cache's format. So programs equal
modulo renaming, and different programs that lower to the same text, are compiled once per
machine, whichever job or search met them first. An entry is two files in one folder:

* ``<key>.json``: the material (compared in full on every read: a foreign or stale entry under
  the key is a miss), the library's file name, its sha256 and the entry symbol; or, for the
  vectorised form of a program TVM rejected, the error (the build goes straight to the serial
  form next time);
* ``<sha256>.so``: the shared library (``export_library``'s object file linked by ``cc``), named
  by its content, so a name is never rewritten with other bytes and a batch of programs
  (``lowering.batch_build``) shares one library, one symbol each.

A library whose bytes do not hash to its entry's sha256, or that does not load, is rebuilt,
never used. Files are written under temporary names and renamed into place, so concurrent
workers never see half a file; the last writer of a key wins, with an equally valid entry.
The folder is kept under its size bound by deleting the least recently used files (a hit
touches its files). A miss costs the object file and a link (about what the JIT it replaces
costs, plus ~15 ms of ``cc``); the library is then loaded and used, so the first run pays no JIT.

``LEIR_BUILD_CACHE``: the folder, or ``off``; default ``$XDG_CACHE_HOME/leir-engine/builds``
(``~/.cache/...``). ``LEIR_BUILD_CACHE_MB``: the size bound (default 2048). ``Verifier(build_cache=...)``
sets both for its workers. ``python -m lowering.build_cache [--clear]`` shows (or empties) it.
Only llvm builds are cached (a CUDA library would hold device code compiled for one GPU).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from engine.leir.diagnostics import LeirError

from .build_stages import stage

FORMAT = 1
ENV = "LEIR_BUILD_CACHE"
SIZE_ENV = "LEIR_BUILD_CACHE_MB"
DEFAULT_MB = 2048
OFF = ("off", "0", "no", "false", "none")
KEEP = 0.8              # pruning leaves at most this fraction of the bound
RESCAN_EVERY = 256      # stores between two scans of the folder (other processes write too)
STALE_TMP_S = 3600.0    # a writer's temporary files older than this were left by a killed process
_LIBRARY = re.compile(r"[0-9a-f]{64}\.so")


def default_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "leir-engine" / "builds"


def settings(folder=None, max_mb=None) -> tuple[Optional[Path], int]:
    """(folder, or None when the cache is off; bound in bytes). ``folder``: a path, False or
    ``"off"`` (off), or None (``$LEIR_BUILD_CACHE``, else the default folder); ``max_mb``: None
    (``$LEIR_BUILD_CACHE_MB``, else ``DEFAULT_MB``). A bad value is a ``LeirError``."""
    if max_mb is None:
        raw = os.environ.get(SIZE_ENV, "").strip()
        try:
            max_mb = float(raw) if raw else DEFAULT_MB
        except ValueError:
            raise LeirError(f"{SIZE_ENV} must be a size in MiB, got {raw!r}") from None
    if not max_mb > 0:
        raise LeirError(f"the build cache's size bound must be positive, got {max_mb} MiB")
    if folder is None:
        raw = os.environ.get(ENV)
        folder = default_folder() if raw is None else raw.strip()
    if folder is False or str(folder).strip().lower() in OFF or str(folder).strip() == "":
        return None, int(max_mb * 2 ** 20)
    return Path(folder).expanduser().absolute(), int(max_mb * 2 ** 20)


def material(text: str, tvm_target, pass_config: dict) -> dict:
    """Everything that decides the machine code of ``text`` built for ``tvm_target``."""
    import tvm

    from .measure.cache import BUILD_VERSION
    return {"format": FORMAT, "source": hashlib.sha256(text.encode()).hexdigest(), "target": str(tvm_target),
            "host": str(tvm.target.codegen.llvm_get_system_triple()), "pass_config": dict(sorted(pass_config.items())),
            "tvm": tvm.__version__, "llvm": int(tvm.target.codegen.llvm_version_major()), "lowering": BUILD_VERSION}


def entry_key(mat: dict) -> str:
    return hashlib.sha256(json.dumps(mat, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """A cache hit: a loaded library and its program's symbol, or the error its build gave."""

    module: object = None
    symbol: Optional[str] = None
    error: Optional[str] = None


class BuildCache:
    """One cache folder. ``counts``: hit, miss, stored, rejected (corrupt, foreign or unloadable
    entries, rebuilt); ``disabled``: why this process stopped writing (a read-only folder, no
    linker), after which builds go on uncached."""

    def __init__(self, folder, max_bytes: int):
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)
        self.counts = {"hit": 0, "miss": 0, "stored": 0, "rejected": 0}
        self.disabled: Optional[str] = None
        self._libraries: dict[str, object] = {}     # file name -> loaded module, in this process
        self._size: Optional[int] = None            # bytes in the folder at the last scan, plus ours since
        self._stores = 0

    # ------------------------------------------------------------------ reading

    def get(self, mat: dict) -> Optional[Entry]:
        """The entry of ``mat``, checked; None on a miss (absent, foreign, corrupt or unloadable)."""
        path = self.folder / f"{entry_key(mat)}.json"
        try:
            raw = path.read_bytes()
        except OSError:
            self.counts["miss"] += 1
            return None
        with stage("load"):
            entry = self._checked(raw, mat)
        if entry is None:
            self.counts["rejected"] += 1
            self.counts["miss"] += 1
            return None
        self.counts["hit"] += 1
        self._touch(path)
        return entry

    def _checked(self, raw: bytes, mat: dict) -> Optional[Entry]:
        try:
            meta = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(meta, dict) or meta.get("material") != mat:
            return None
        if "error" in meta:
            return Entry(error=meta["error"]) if isinstance(meta["error"], str) else None
        lib, sha, sym = meta.get("library"), meta.get("sha256"), meta.get("symbol")
        if not (isinstance(lib, str) and _LIBRARY.fullmatch(lib) and lib == f"{sha}.so" and isinstance(sym, str)
                and sym.isidentifier()):
            return None
        module = self._load(lib, sha)
        if module is None:
            return None
        try:
            module.get_function(sym)
        except Exception:       # the symbol is not in the library
            return None
        return Entry(module=module, symbol=sym)

    def _load(self, lib: str, sha: str):
        """The library ``lib`` loaded (once per process), if its bytes hash to ``sha``."""
        if lib in self._libraries:
            return self._libraries[lib]
        path = self.folder / lib
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() != sha:
            return None
        import tvm
        try:
            module = tvm.runtime.load_module(str(path))
        except Exception:       # not a library this process can load
            return None
        self._libraries[lib] = module
        self._touch(path)
        return module

    # ------------------------------------------------------------------ writing

    def put(self, executable_module, entries: list[tuple[dict, str]]):
        """Store a compiled module (``tvm.compile(...).mod``) as one library for ``entries``
        ((material, symbol) each); the library loaded back, or None when it could not be stored
        (the caller then runs the compiled module)."""
        if self.disabled is not None:
            return None
        tmp = None
        with stage("export"):
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.folder))
                obj, so = tmp / "lib.o", tmp / "lib.so"
                executable_module.write_to_file(str(obj))
                _link(obj, so)
                data = so.read_bytes()
                sha = hashlib.sha256(data).hexdigest()
                lib = f"{sha}.so"
                os.replace(so, self.folder / lib)
                written = len(data)
                for mat, sym in entries:
                    written += self._write_entry(mat, {"library": lib, "sha256": sha, "symbol": sym})
            except Exception as e:      # a full disk, a read-only folder, no linker: builds go on uncached
                self._disable(f"{type(e).__name__}: {e}")
                return None
            finally:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
        self.counts["stored"] += len(entries)
        self._grown(written)
        with stage("load"):
            return self._load(lib, sha)

    def put_error(self, mat: dict, message: str) -> None:
        """Remember that TVM rejected this text (only for a form the build then retries another way)."""
        if self.disabled is not None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._grown(self._write_entry(mat, {"error": message}))
        except OSError as e:
            self._disable(f"{type(e).__name__}: {e}")

    def _write_entry(self, mat: dict, fields: dict) -> int:
        from engine.leir.files import write_atomic
        text = json.dumps({"material": mat, **fields}, sort_keys=True)
        write_atomic(self.folder / f"{entry_key(mat)}.json", text)
        return len(text)

    def _disable(self, why: str) -> None:
        self.disabled = why
        print(f"leir: the build cache in {self.folder} is off for this process: {why}", file=sys.stderr)

    # ------------------------------------------------------------------ size

    def _grown(self, n: int) -> None:
        self._stores += 1
        if self._size is None or self._stores % RESCAN_EVERY == 0:
            self.prune()
            return
        self._size += n
        if self._size > self.max_bytes:
            self.prune()

    def prune(self) -> int:
        """Delete the least recently used files until the folder holds at most ``KEEP`` of the
        bound (nothing when it is under the bound), and temporary files left by killed writers;
        the bytes left."""
        files, total, now = [], 0, time.time()
        try:
            listing = list(os.scandir(self.folder))
        except OSError:
            return 0
        for e in listing:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.startswith("."):
                if now - st.st_mtime > STALE_TMP_S:
                    _remove(e.path)
                continue
            files.append((st.st_mtime, st.st_size, e.path))
            total += st.st_size
        if total > self.max_bytes:
            files.sort()
            for _, size, path in files:
                if total <= KEEP * self.max_bytes:
                    break
                _remove(path)
                total -= size
        self._size = total
        return total

    def clear(self) -> None:
        """Delete every entry (the folder stays)."""
        for e in list(os.scandir(self.folder)) if self.folder.is_dir() else []:
            _remove(e.path)
        self._libraries.clear()
        self._size = 0

    def _touch(self, path: Path) -> None:
        try:
            os.utime(path)
        except OSError:
            pass


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _link(obj: Path, so: Path) -> None:
    """``cc -shared``; TVM's own linker call (``g++``) where there is no ``cc``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        from tvm.support import cc as tvm_cc
        tvm_cc.create_shared(str(so), [str(obj)])
        return
    r = subprocess.run([cc, "-shared", "-o", str(so), str(obj), "-lm"], capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(f"{cc} -shared failed: {(r.stderr or r.stdout).strip()[:300]}")


# ---------------------------------------------------------------------- the process's cache

_STATE: dict = {}


def configure(folder=None, max_mb=None) -> Optional[BuildCache]:
    """Set this process's cache (``settings``' arguments); the cache, or None when off."""
    where, bound = settings(folder, max_mb)
    _STATE["cache"] = BuildCache(where, bound) if where is not None else None
    return _STATE["cache"]


def reset() -> None:
    """Forget this process's cache: the next build reads the environment again."""
    _STATE.clear()


def active() -> Optional[BuildCache]:
    """This process's cache: as ``configure`` set it, else from the environment."""
    if "cache" not in _STATE:
        configure()
    return _STATE["cache"]


def main(argv=None) -> int:
    import argparse

    from engine.leir.cli import run_cli

    def _main(argv):
        ap = argparse.ArgumentParser(prog="python -m lowering.build_cache",
                                     description="Show (or empty) the on-disk cache of compiled programs.")
        ap.add_argument("--clear", action="store_true", help="delete every entry")
        a = ap.parse_args(argv)
        cache = active()
        if cache is None:
            print(f"the build cache is off ({ENV}={os.environ.get(ENV)})")
            return 0
        if a.clear:
            cache.clear()
        size = cache.prune() if cache.folder.is_dir() else 0
        n = len(list(cache.folder.glob("*.json"))) if cache.folder.is_dir() else 0
        print(f"{cache.folder}: {n} entries, {size / 2 ** 20:.1f} MiB of {cache.max_bytes / 2 ** 20:.0f} MiB")
        return 0

    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
