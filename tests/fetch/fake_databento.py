"""A fake Databento historical HTTP API on 127.0.0.1 (TLS), serving real DBN bytes.

The databento client always speaks https to its gateway, so the server wraps its socket in
TLS with a certificate from a throwaway CA (trustme) that the tests hand to requests via
REQUESTS_CA_BUNDLE. It answers the endpoints `fxstore fetch` calls as Databento documents
them (form-encoded POSTs, basic auth with the key as user name, JSON answers, batch files
with ``sha256:`` hashes and Range support), and can be told to fail: an HTTP status for the
next calls of an endpoint, a download cut off after some bytes, a file served corrupted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit

DATA: Final = Path(__file__).parents[1] / "data" / "peer-dbn"
KEY: Final = "db-FAKEKEYfor7fxstore0tests00XyZ"

#: Real DBN bytes per schema (Databento's own test files). The statistics "file" is the
#: trades test file: fxstore stores and checks statistics files but does not decode them.
SCHEMA_FILES: Final = {
    "mbp-10": "GLBX.MDP3.test_data.mbp-10.dbn.zst",
    "definition": "GLBX.MDP3.definition-es-fut.dbn.zst",
    "statistics": "GLBX.MDP3.test_data.trades.dbn.zst",
}


@dataclass
class Fault:
    """An HTTP error the endpoint answers instead of its result, `times` times."""

    status: int
    detail: object = "Internal error"
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeState:
    """What the fake API serves and what it was asked."""

    key: str = KEY
    cost_usd: dict[str, float] = field(
        default_factory=lambda: {"mbp-10": 12.5, "definition": 0.01, "statistics": 0.02}
    )
    billable_bytes: dict[str, int] = field(
        default_factory=lambda: {"mbp-10": 250_000_000, "definition": 1200, "statistics": 900}
    )
    known_symbols: dict[str, list[int]] = field(default_factory=lambda: {"ES.FUT": [5482]})
    job_states: list[str] = field(default_factory=lambda: ["queued", "processing", "done"])
    faults: dict[str, list[Fault]] = field(default_factory=lambda: defaultdict(list))
    cut_after: dict[str, tuple[int, int]] = field(default_factory=dict)
    """file name -> (offset in the file where the connection drops, times; -1 for ever)."""
    stall_at: dict[str, int] = field(default_factory=dict)
    """file name -> offset where the download hangs until `release` is set, then drops."""
    release: threading.Event = field(default_factory=threading.Event)
    stalled: threading.Event = field(default_factory=threading.Event)
    """Set once a download hangs at its `stall_at` offset."""
    corrupt: dict[str, int] = field(default_factory=dict)
    """file name -> times it is served with a flipped byte."""
    calls: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    ranges: list[tuple[str, str]] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)
    """job id -> schema."""
    polls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def calls_to(self, endpoint: str) -> int:
        return sum(1 for name, _ in self.calls if name == endpoint)

    def job_files(self, job_id: str) -> dict[str, bytes]:
        schema = self.jobs[job_id]
        day = {"mbp-10": "20201228", "definition": "20230402", "statistics": "20201228"}[schema]
        meta = {"job_id": job_id, "schema": schema, "query": {"dataset": "GLBX.MDP3"}}
        return {
            f"glbx-mdp3-{day}.{schema}.dbn.zst": (DATA / SCHEMA_FILES[schema]).read_bytes(),
            "metadata.json": json.dumps(meta).encode(),
            "manifest.json": json.dumps({"job_id": job_id, "files": 1}).encode(),
            "symbology.json": b'{"result": {}}',
            "condition.json": b"[]",
        }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self._serve(url.path, {k: v[0] for k, v in parse_qs(url.query).items()})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        self._serve(urlsplit(self.path).path, {k: v[0] for k, v in form.items()})

    def _serve(self, path: str, form: dict[str, str]) -> None:
        state = self.server.state
        endpoint = path.removeprefix("/v0/")
        if endpoint.startswith("batch/download/"):
            endpoint = "batch/download"
        state.calls.append((endpoint, form))
        if self._user() != state.key:
            return self._json(401, {"detail": f"Authentication failed for {self._user()}."})
        faults = state.faults.get(endpoint)
        if faults:
            fault = faults[0]
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
            return self._json(fault.status, {"detail": fault.detail}, fault.headers)
        handler = getattr(self, "_" + endpoint.replace(".", "_").replace("/", "_"))
        handler(path, form)

    def _user(self) -> str:
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return ""
        return base64.b64decode(auth[6:]).decode().partition(":")[0]

    def _json(self, status: int, obj: object, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _symbology_resolve(self, _path: str, form: dict[str, str]) -> None:
        known = self.server.state.known_symbols
        symbols = form["symbols"].split(",")
        result = {
            s: [{"d0": form["start_date"], "d1": form["end_date"], "s": str(i)} for i in known[s]]
            for s in symbols
            if s in known
        }
        missing = [s for s in symbols if s not in known]
        self._json(200, {"result": result, "not_found": missing, "partial": [], "status": 0})

    def _metadata_get_cost(self, _path: str, form: dict[str, str]) -> None:
        self._json(200, self.server.state.cost_usd[form["schema"]])

    def _metadata_get_billable_size(self, _path: str, form: dict[str, str]) -> None:
        self._json(200, self.server.state.billable_bytes[form["schema"]])

    def _metadata_get_record_count(self, _path: str, form: dict[str, str]) -> None:
        self._json(200, self.server.state.billable_bytes[form["schema"]] // 100)

    def _batch_submit_job(self, _path: str, form: dict[str, str]) -> None:
        state = self.server.state
        assert form["encoding"] == "dbn" and form["compression"] == "zstd"
        assert form["split_duration"] == "day"
        job_id = f"GLBX-20240101-JOB{len(state.jobs) + 1:07d}"
        state.jobs[job_id] = form["schema"]
        self._json(200, {"id": job_id, "state": "received", "cost_usd": 1.0})

    def _batch_get_job_details(self, _path: str, form: dict[str, str]) -> None:
        state = self.server.state
        states = state.job_states
        n = state.polls[form["job_id"]]
        state.polls[form["job_id"]] += 1
        current = states[min(n, len(states) - 1)]
        progress = 100 if current == "done" else 50 if current == "processing" else 0
        self._json(200, {"id": form["job_id"], "state": current, "progress": progress})

    def _batch_list_files(self, _path: str, form: dict[str, str]) -> None:
        job_id = form["job_id"]
        base = f"https://127.0.0.1:{self.server.server_port}/v0/batch/download/{job_id}"
        files = [
            {
                "filename": name,
                "size": len(data),
                "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
                "urls": {"https": f"{base}/{name}", "ftp": ""},
            }
            for name, data in self.server.state.job_files(job_id).items()
        ]
        self._json(200, files)

    def _batch_download(self, path: str, _form: dict[str, str]) -> None:
        state = self.server.state
        job_id, name = path.split("/")[-2:]
        data = state.job_files(job_id)[name]
        if state.corrupt.get(name, 0):
            state.corrupt[name] -= 1
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        if (ranged := self.headers.get("Range")) is not None:
            state.ranges.append((name, ranged))
            start = int(ranged.removeprefix("bytes=").split("-")[0])
        body = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        stall = state.stall_at.get(name)
        if stall is not None and start < stall:
            self.wfile.write(data[start:stall])
            self.wfile.flush()
            state.stalled.set()
            state.release.wait(timeout=30)
            self.close_connection = True
            return
        cut, times = state.cut_after.get(name, (0, 0))
        if times != 0 and cut < len(data):
            state.cut_after[name] = (cut, times - 1)
            self.wfile.write(data[start:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def _timeseries_get_range(self, _path: str, form: dict[str, str]) -> None:
        data = (DATA / SCHEMA_FILES[form["schema"]]).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: FakeState


class FakeDatabento:
    """The fake API, serving on 127.0.0.1 until :meth:`close`."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.state = FakeState()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
