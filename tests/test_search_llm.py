"""The LLM policies against a local OpenAI-compatible server started by the test (standard
library ``http.server`` in a thread) with scripted answers: valid choices, malformed text,
prose, HTTP 500 / 429, a hang past the client timeout. The constraint must be sent, bad
answers must be failed samples, and the search must never crash."""
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TINY = "B^{4}_{tx=0}L^{32}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];" \
       "B^{4}_{tx=0}L^{32}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];" \
       "B^{4}_{tx=0}L^{32}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];"


def tiny_program():
    from engine import parse_program
    return parse_program(TINY, name="tiny_softmax", inputs=[{"name": "A", "dtype": "f32", "shape": [4, 32]}],
                         outputs=[{"name": "C", "dtype": "f32", "shape": [4, 32]}])


def completion(texts, model="fake", prompt_tokens=100, completion_tokens=3):
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                        for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens * len(texts),
                      "total_tokens": prompt_tokens + completion_tokens * len(texts)}}


class FakeLLM:
    """A scripted OpenAI-compatible server. ``script``: actions used in order, then
    ``responder(body)`` for every later request. Actions: ("text", s) / ("texts", [s, ...]),
    ("status", code), ("hang", seconds), ("raw", bytes)."""

    def __init__(self, script=(), responder=None):
        self.script = list(script)
        self.responder = responder
        self.requests = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with fake.lock:
                    fake.requests.append({"path": self.path, "body": body,
                                          "auth": self.headers.get("Authorization")})
                    action = fake.script.pop(0) if fake.script else fake.responder(body)
                kind = action[0]
                if kind == "hang":
                    time.sleep(action[1])
                    action = ("text", "1")
                    kind = "text"
                if kind == "status":
                    payload = json.dumps({"error": {"message": f"scripted {action[1]}", "type": "server_error"}}).encode()
                    self.send_response(action[1])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if kind == "raw":
                    payload = action[1]
                else:
                    texts = [action[1]] if kind == "text" else action[1]
                    payload = json.dumps(completion(texts, body.get("model", "fake"))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def menu_responder(body):
    """A well-behaved constrained model: the first allowed menu number(s)."""
    n = body.get("n", 1)
    so = (body.get("structured_outputs") or {}).get("choice")
    if so:
        return ("texts", so[:n])
    rf = body.get("response_format")
    if rf:
        enum = rf["json_schema"]["schema"]["properties"]["choices"]["items"]["enum"]
        return ("text", json.dumps({"choices": enum[:rf["json_schema"]["schema"]["properties"]["choices"]["maxItems"]]}))
    return ("text", "1")


_CURRENT = re.compile(r"Give the current IR of [^:]*: '(.*?)', where the known variables")


def free_responder_factory(program):
    """A model that writes correct LEIR: one-step neighbours of the current IR, computed with
    the engine beforehand for the root and its first answers (egglog's e-graph stays on the
    thread that made it; the server answers from its own threads)."""
    from engine import Engine
    engine = Engine(strategies=["loop_split", "loop_reorder", "expression_splitting"])
    answers = {}
    frontier = [program]
    for _ in range(2):
        nxt = []
        for p in frontier:
            steps = engine.enumerate(p)[:4]
            answers[p.to_leir()] = [json.dumps({"transformed_IR": st.leir, "applied_strategies": [st.strategy]})
                                    for st in steps]
            nxt += [st.program for st in steps]
        frontier = nxt
    counter = [0]

    def respond(body):
        cur = _CURRENT.search(body["messages"][-1]["content"]).group(1)
        options = answers.get(cur) or ["?"]
        counter[0] += 1
        return ("text", options[counter[0] % len(options)])
    return respond


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper")


@pytest.fixture(scope="module")
def verifier():
    from lowering import Verifier
    v = Verifier("llvm", trials=2, timeout=120, repeat=3)
    yield v
    v.close()


def opts(server, **kw):
    from search import SearchOptions
    base = dict(algorithm="chain", policy="llm", budget=3, endpoint=server.url, model="fake-model",
                llm_timeout=5.0, retries=2, confirm=1, min_repeat_ms=0.2, repeat=3, trials=2,
                extra={"backoff_s": 0.01})
    base.update(kw)
    return SearchOptions(**base)


def search(tmp_path, server, engine, verifier, name="t.json", **kw):
    from search.run import run_search
    out = tmp_path / name
    traj = run_search(tiny_program(), opts(server, **kw), engine=engine, verifier=verifier, out=str(out),
                      progress=lambda m: None)
    on_disk = json.loads(out.read_text())
    assert on_disk["complete"] and on_disk["summary"]["samples"] == traj.samples
    assert traj.samples <= kw.get("budget", 3)
    return on_disk


# ------------------------------------------------------------------------------------ menu policy


def test_choice_constraint_is_sent_and_followed(tmp_path, engine, verifier):
    with FakeLLM(responder=menu_responder) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="greedy", budget=4)
    body = srv.requests[0]["body"]
    choices = body["structured_outputs"]["choice"]
    menu = rec["llm_calls"][0]["menu"]
    assert choices == [str(m["number"]) for m in menu] and len(choices) <= 40
    assert body["n"] == 2                                       # greedy: 2 proposals, one per answer
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful IR optimization assistant."}
    prompt = body["messages"][1]["content"]
    assert "Greedy-based optimization" in prompt and "'A' with the dtype torch.float32 and shape [4, 32]" in prompt
    assert "\n1. " in prompt and "Answer with its number only." in prompt
    accepted = [s for s in rec["samples"] if s["status"] == "accepted"]
    assert accepted and all(s["kind"] == "menu" for s in accepted)
    # each accepted sample is the menu entry the model named
    first = rec["samples"][0]
    assert first["menu_number"] == menu[0]["candidate"] and first["key"] == menu[0]["key"]
    assert rec["summary"]["tokens"]["total_tokens"] == sum(c["usage"]["total_tokens"] for c in rec["llm_calls"]) > 0
    assert all(c["latency_s"] >= 0 and c["attempts"] == 1 for c in rec["llm_calls"])


def test_json_schema_constraint_sends_an_enum_of_the_menu(tmp_path, engine, verifier):
    with FakeLLM(responder=menu_responder) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="beam", constraint="json", budget=3)
    body = srv.requests[0]["body"]
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    items = schema["properties"]["choices"]["items"]
    assert items["enum"] == list(range(1, len(rec["llm_calls"][0]["menu"]) + 1))
    assert schema["properties"]["choices"]["maxItems"] == 3 and "structured_outputs" not in body
    assert '{"choices": [...]}' in body["messages"][1]["content"]
    assert any(s["status"] == "accepted" for s in rec["samples"])


def test_bad_answers_are_failed_samples_and_never_crash(tmp_path, engine, verifier):
    script = [("text", "I would pick the loop tiling, it looks promising."),   # prose
              ("text", '{"choices": [1, '),                                    # malformed
              ("text", "9999"),                                                # off the menu
              ("raw", b"this is not JSON at all"),                             # a broken response body
              ("text", "<think>tiling?</think><answer>2</answer>")]            # valid, wrapped
    with FakeLLM(script, responder=menu_responder) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="chain", budget=5, constraint="none")
    statuses = [s["status"] for s in rec["samples"]]
    assert statuses[:4] == ["parse failed", "parse failed", "not on menu", "llm error"]
    assert statuses[4] == "accepted"
    assert rec["samples"][4]["menu_number"] == rec["llm_calls"][4]["menu"][1]["candidate"]
    # the failures are fed back to the model (chain keeps the node and says so)
    assert "has been transformed 1 times but failed" in srv.requests[1]["body"]["messages"][1]["content"]
    assert "structured_outputs" not in srv.requests[0]["body"]        # --constraint none sends none


def test_server_errors_are_retried_with_backoff_then_succeed(tmp_path, engine, verifier):
    with FakeLLM([("status", 500), ("status", 429)], responder=menu_responder) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=1)
    call = rec["llm_calls"][0]
    assert call["attempts"] == 3 and call["error"] is None and len(srv.requests) == 3
    assert rec["samples"][0]["status"] == "accepted"


def test_persistent_errors_and_a_hang_are_failed_samples(tmp_path, engine, verifier):
    script = [("status", 500), ("status", 503), ("hang", 3.0), ("hang", 3.0)]
    with FakeLLM(script, responder=menu_responder) as srv:
        t0 = time.monotonic()
        rec = search(tmp_path, srv, engine, verifier, budget=3, retries=1, llm_timeout=1.0)
        assert time.monotonic() - t0 < 60
    calls = rec["llm_calls"]
    assert [c["error"]["type"] for c in calls[:2]] == ["InternalServerError", "APITimeoutError"]
    assert [s["status"] for s in rec["samples"]] == ["llm error", "llm error", "accepted"]
    assert calls[0]["attempts"] == calls[1]["attempts"] == 2


def test_nothing_accepted_still_writes_the_trajectory(tmp_path, engine, verifier):
    with FakeLLM(responder=lambda body: ("text", "no idea, sorry")) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=2)
    assert rec["summary"]["samples"] == 2 and len(rec["nodes"]) == 1
    assert rec["best"]["steps"] == [] and rec["best"]["speedup"] == 1.0
    assert rec["best"]["leir"] == tiny_program().to_leir()


# ------------------------------------------------------------------------------------ free-form


def test_free_form_answers_are_parsed_checked_verified_and_traced(tmp_path, engine, verifier):
    prog = tiny_program()
    canary = tmp_path / "canary"
    evil = json.dumps({"transformed_IR": f"__import__('os').system('touch {canary}')", "applied_strategies": "x"})
    bad_known = TINY.replace("A^{f32,g}_{tx,a})", "A^{f64,g}_{tx,a})", 1)       # changes a known tensor's dtype
    wrong = TINY.replace("exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E", "exp(A^{f32,g}_{tx,a})/E")  # not equivalent
    good = free_responder_factory(prog)
    script = [("text", evil),
              ("text", "```json\n" + json.dumps({"transformed_IR": bad_known, "applied_strategies": ["x"]}) + "\n```"),
              ("text", json.dumps({"transformed_IR": wrong, "applied_strategy": "cancellation"})),
              ("text", json.dumps({"transformed_IR": TINY, "applied_strategies": ["nothing"]}))]
    with FakeLLM(script, responder=good) as srv:
        rec = search(tmp_path, srv, engine, verifier, policy="llm-free", budget=4)
    assert not canary.exists()
    st = rec["samples"]
    assert st[0]["status"] == "invalid program" and "error" in st[0]["message"]
    assert st[1]["status"] == "invalid program" and "f64" in st[1]["message"]
    assert st[2]["status"] == "not equal" and st[2]["kind"] == "free"
    assert st[3]["status"] == "accepted"                          # the 4th answer (same as root) is no sample
    assert rec["summary"]["repeated_proposals"] == 1
    node = rec["nodes"][1]
    assert node["reached_by"] is not None and node["reached_by"]["strategy"] == st[3]["strategy"]
    if node["reached_by"]["replays"]:                               # replayable with Engine.apply
        assert node["steps"][0]["rule"] == node["reached_by"]["rule"]
    else:
        assert node["steps"][0]["free"] and node["steps"][0]["leir"] == node["leir"]
    body = srv.requests[0]["body"]
    prompt = body["messages"][1]["content"]
    assert "'transformed_IR', 'applied_strategies'" in prompt and "online softmax" in prompt
    assert "You are FORBIDDEN" in srv.requests[1]["body"]["messages"][1]["content"]


def test_free_form_program_no_rule_reaches_is_recorded_as_such(tmp_path, engine, verifier):
    from engine import Engine
    prog = tiny_program()
    e = Engine(strategies="bitwise")
    s1 = [s for s in e.enumerate(prog) if s.strategy == "loop_split"][0]
    s2 = [s for s in e.enumerate(s1.program) if s.strategy == "loop_split"][-1]   # two steps away
    with FakeLLM([("text", json.dumps({"transformed_IR": s2.leir, "applied_strategies": ["loop split"]}))],
                 responder=lambda b: ("text", "?")) as srv:
        rec = search(tmp_path, srv, engine, verifier, policy="llm-free", budget=1)
    node = rec["nodes"][1]
    assert rec["samples"][0]["status"] == "accepted" and node["reached_by"] is None
    assert node["steps"][0]["free"] is True and node["steps"][0]["leir"] == s2.leir
