"""Worker processes that a crash, an out-of-memory kill or a hang cannot take the caller down
with (shared plumbing).

A worker is a fresh interpreter running ``python -m MODULE FD`` whose module calls ``serve``
with its request handlers; the two ends talk over a socket pair, one pickled request and one
pickled answer at a time. Unlike ``multiprocessing``'s spawn, the caller's main script is never
re-imported, so any script (or notebook) may start workers without a ``__main__`` guard.

Every worker ends with its caller the same way (``serve``'s watchdog): a caller killed with
``kill -9`` leaves no worker behind, whichever thread started it and whatever it is busy with.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Callable, Optional


class WorkerFailed(Exception):
    """The worker did not answer: ``reason`` is "timeout" or "crashed"."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


START_TIMEOUT = 300.0     # seconds a worker may take to start (imports) before it counts as crashed


class WorkerProcess:
    """One worker: ``call(request, timeout)`` returns its answer or raises ``WorkerFailed``
    (the process is then gone; make a new one). The worker's start-up (interpreter, imports)
    is not part of any call's ``timeout``: the first call waits for the worker's "ready"."""

    def __init__(self, module: str, args: tuple = (), env: Optional[dict] = None, stderr=None):
        """``stderr``: where the worker's diagnostics go (None: this process's stderr; a path:
        appended to that file)."""
        parent, child = socket.socketpair()
        fd = child.fileno()
        err = open(stderr, "ab") if isinstance(stderr, (str, os.PathLike)) else stderr
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", module, str(fd), *map(str, args)],
                                         pass_fds=(fd,), stdin=subprocess.DEVNULL, stderr=err, env=env)
        finally:
            if err is not stderr:
                err.close()
        child.close()
        self.conn = Connection(os.dup(parent.fileno()))
        parent.close()
        self.ready = False

    def _wait_ready(self) -> None:
        if not self.conn.poll(START_TIMEOUT):
            self.kill()
            raise WorkerFailed("crashed", f"the worker did not start within {START_TIMEOUT:g} s")
        if self.conn.recv() != "ready":
            raise OSError("unexpected greeting")
        self.ready = True

    def call(self, request, timeout: Optional[float] = None):
        try:
            if not self.ready:
                self._wait_ready()
            self.conn.send(request)
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerFailed("timeout", f"no answer within {timeout:g} s")
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            raise WorkerFailed("crashed", self._death()) from None

    def _death(self) -> str:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "the worker stopped answering"
        if code < 0:
            try:
                return f"the worker was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"the worker was killed by signal {-code}"
        return f"the worker exited with status {code}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        try:
            self.conn.close()
        except OSError:
            pass


def serve(handler: Callable, argv: Optional[list] = None, prepare: Optional[Callable] = None) -> None:
    """The worker side: run ``prepare`` (heavy imports), say "ready", then answer
    ``handler(request)`` for each request until the caller goes away. Anything the handlers
    print goes to stderr; stdout is left alone."""
    argv = sys.argv[1:] if argv is None else argv
    conn = Connection(int(argv[0]))
    sys.stdout = sys.stderr
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    if prepare is not None:
        prepare()
    try:
        conn.send("ready")
    except (BrokenPipeError, OSError):  # the caller went away while this worker started
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = handler(request)
        except MemoryError:
            answer = ("oom", "the worker ran out of memory")
        except Exception as e:          # a bug below us: report it and keep serving
            answer = ("error", f"{type(e).__name__}: {e}")
        try:
            conn.send(answer)
        except (BrokenPipeError, OSError):
            return


def _exit_with_parent(ppid: int) -> None:
    """A worker busy in a long request does not read its socket: when its caller is gone (killed
    with ``kill -9``, say) it is re-parented, and this watchdog ends it within a second. (Not the
    kernel's ``PR_SET_PDEATHSIG``: that fires when the *thread* that started the worker ends, and
    Verifiers and enumerations start workers from pool threads; nor is it portable.)"""
    while True:
        time.sleep(1.0)
        if os.getppid() != ppid:
            os._exit(1)
