"""A Volcano HTTP extender for tests and demos: a server on 127.0.0.1 (a free port) answering the
verbs it is given, in a thread, recording each request (the extender plugin's counterpart,
plugins/extender.py).

``Script`` gives scripted answers to the verbs named in ``SCRIPT_VERBS`` (a node the predicate
filters, prioritize's scores, pods whose allocation is refused), read at each call, so a test may
change them while the scheduler runs; ``Extender.task_events`` lists the allocate and deallocate
events received."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: verb → answer: a JSON value, or a function of the request body giving (status code, JSON value)
Answers = dict[str, Any]


class Extender:
    def __init__(self, answers: Answers, delay: float = 0.0) -> None:
        self.answers = answers
        self.delay = delay
        #: (verb, request body) in the order received
        self.calls: list[tuple[str, Any]] = []
        self.url = ""

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]

    def task_events(self) -> list[tuple[str, str, str]]:
        """(verb, pod name, node name) of each allocate and deallocate event received, in order."""
        return [
            (verb, body["task"]["Name"], body["task"]["NodeName"])
            for verb, body in list(self.calls)
            if verb in (ALLOCATE, DEALLOCATE)
        ]


PREDICATE, PRIORITIZE, ALLOCATE, DEALLOCATE = "predicate", "prioritize", "allocate", "deallocate"
#: the extender plugin's arguments naming the verbs a ``Script`` answers
SCRIPT_VERBS = {
    "extender.predicateVerb": PREDICATE,
    "extender.prioritizeVerb": PRIORITIZE,
    "extender.allocateFuncVerb": ALLOCATE,
    "extender.deallocateFuncVerb": DEALLOCATE,
}


@dataclass
class Script:
    """Scripted answers, in Volcano's shapes (pkg/scheduler/plugins/extender/argument.go)."""

    #: node name → the reason the predicate filters it with
    filtered: dict[str, str] = field(default_factory=dict)
    #: node name → the score prioritize gives it (others: 0)
    scores: dict[str, float] = field(default_factory=dict)
    #: pod name → the errorMessage refusing its allocation
    refused: dict[str, str] = field(default_factory=dict)

    def answers(self) -> Answers:
        return {
            PREDICATE: lambda body: (200, {"status": self.filtered.get(body["node"]["Name"], "")}),
            PRIORITIZE: lambda body: (
                200,
                {"nodeScore": {n["Name"]: self.scores.get(n["Name"], 0) for n in body["nodes"]}},
            ),
            ALLOCATE: lambda body: (200, {"errorMessage": self.refused.get(body["task"]["Name"], "")}),
            DEALLOCATE: {},
        }


@contextmanager
def extender(answers: Answers, delay: float = 0.0) -> Iterator[Extender]:
    ext = Extender(answers, delay)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            verb = self.path.strip("/")
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            ext.calls.append((verb, body))
            if ext.delay:
                time.sleep(ext.delay)
            answer = ext.answers.get(verb, {})
            code, value = answer(body) if callable(answer) else (200, answer)
            raw = value if isinstance(value, bytes) else json.dumps(value).encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ext.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ext
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
