"""A small model server for the endpoint tests: ``python endpoint_server.py PORT``.

GET /health: 200. GET /metrics: vLLM's vllm:num_requests_waiting, $QUEUED (0). Any other path: a
JSON answer naming the path, the query, the method, the body, the
GPUs it was given (CUDA_VISIBLE_DEVICES), its GPR (EGS_GPRS), GREETING and its pid, after sleeping
``?sleep=`` seconds. GET /stream: three lines sent one by one (as server-sent events are).
"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _answer(self) -> None:
        url = urlparse(self.path)
        if url.path == "/health":
            self._send(200, b"ok", "text/plain")
            return
        if url.path == "/metrics":  # as vLLM says how many requests wait in its queue
            queued = os.environ.get("QUEUED", "0")
            text = f'# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name="m"}} {queued}\n'
            self._send(200, text.encode(), "text/plain; version=0.0.4")
            return
        if url.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                line = f"data: {i}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            return
        query = parse_qs(url.query)
        time.sleep(float(query.get("sleep", ["0"])[0]))
        length = int(self.headers.get("Content-Length") or 0)
        answer = {
            "path": url.path,
            "query": url.query,
            "method": self.command,
            "body": self.rfile.read(length).decode() if length else "",
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gprs": os.environ.get("EGS_GPRS"),
            "greeting": os.environ.get("GREETING"),
            "authorization": self.headers.get("Authorization"),
            "cookie": self.headers.get("Cookie"),
            "token": os.environ.get("JUPYTERHUB_API_TOKEN"),
            "pid": os.getpid(),
        }
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
