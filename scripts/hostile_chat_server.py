#!/usr/bin/env python3
"""A hostile OpenAI-compatible chat server, to measure what it costs agcore (issue 10, item 8).

    python3 scripts/hostile_chat_server.py MODE [PORT]
    /usr/bin/time -v target/debug/agcore run --base-url http://127.0.0.1:PORT/v1 --model m "hi"

MODE is one of:
  line       an SSE `data:` line that never ends (no newline)
  text       endless small text deltas
  errbody    HTTP 500 with an endless error body
  json       an endless JSON body (Content-Type: application/json) in place of a stream
  keepalive  `: keep-alive` comments (and empty events) forever, never a delta
  drip       one real text delta every second, forever (only the response deadline ends it)

Each connection writes at most CAP bytes (or runs at most CAP_SECONDS), then closes: nothing
here runs without bound. Prints, per connection, how many bytes it wrote.
"""

import json
import socketserver
import sys
import time

CAP = 4 * 1024**3
CAP_SECONDS = 30 * 60
PIECE = 64 * 1024


def text_event(text):
    chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return ("data: " + json.dumps(chunk) + "\n\n").encode()


def body(mode):
    """The head and a generator of body pieces for MODE."""
    sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    if mode == "line":
        def pieces():
            yield b'data: {"choices":[{"index":0,"delta":{"content":"'
            block = b"a" * PIECE
            while True:
                yield block
        return sse, pieces()
    if mode == "text":
        def pieces():
            block = text_event("a" * 1000) * 64
            while True:
                yield block
        return sse, pieces()
    if mode == "errbody":
        head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        def pieces():
            block = b"e" * PIECE
            while True:
                yield block
        return head, pieces()
    if mode == "json":
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        def pieces():
            yield b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
            block = b"a" * PIECE
            while True:
                yield block
        return head, pieces()
    if mode == "keepalive":
        def pieces():
            while True:
                yield b": keep-alive\n\ndata:\n\n"
                time.sleep(0.5)
        return sse, pieces()
    if mode == "drip":
        def pieces():
            while True:
                yield text_event("a")
                time.sleep(1)
        return sse, pieces()
    raise SystemExit(f"unknown mode {mode!r}")


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        request = b""
        while b"\r\n\r\n" not in request:
            data = self.request.recv(65536)
            if not data:
                return
            request += data
        head, rest = request.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        while len(rest) < length:
            data = self.request.recv(65536)
            if not data:
                break
            rest += data
        head, pieces = body(MODE)
        self.request.sendall(head.encode())
        written, started = 0, time.monotonic()
        try:
            for piece in pieces:
                self.request.sendall(piece)
                written += len(piece)
                if written >= CAP or time.monotonic() - started > CAP_SECONDS:
                    break
        except OSError:
            pass
        elapsed = time.monotonic() - started
        print(f"{MODE}: wrote {written} bytes in {elapsed:.1f} s", flush=True)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    MODE = sys.argv[1]
    body(MODE)  # reject an unknown mode at once
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8090
    with Server(("127.0.0.1", port), Handler) as server:
        print(f"{MODE} on http://127.0.0.1:{port}/v1", flush=True)
        server.serve_forever()
