#!/usr/bin/env bash
# The reviewer's door beside a direct connection, in one run (BENCHMARKS.md, "The door"): a
# stand-in client started by `launch --plan` (sandbox on) sends 500 small model-API requests on
# one keep-alive connection and reads a 64 MiB answer and a streamed answer, once through the
# door (the plan's `door`: the stand-in upstream on the host, the key set by the door on each
# request) and once straight to the upstream. It prints per-request latency (p50, p99), the
# throughput and the time to the first event of the stream.
#
#   scripts/bench-door.sh BIN
#
# Needs python3. Nothing leaves 127.0.0.1.
set -euo pipefail
bin=${1:?usage: bench-door.sh BIN}
tmp=$(mktemp -d)
trap 'kill "$upstream_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worktree"

cat > "$tmp/upstream.py" <<'PY'
import http.server, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        self.rfile.read(n)
        body = b'{"type":"message","content":[{"type":"text","text":"ok"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/big":
            size = 64 << 20
            self.send_response(200)
            self.send_header("content-length", str(size))
            self.end_headers()
            chunk = b"x" * (1 << 20)
            for _ in range(64):
                self.wfile.write(chunk)
        else:  # /sse: one event now, the next after 200 ms
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for i in range(2):
                event = f"event: e{i}\ndata: {time.time()}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                time.sleep(0.2)
            self.wfile.write(b"0\r\n\r\n")
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$tmp/upstream.py" > "$tmp/port" &
upstream_pid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")

cat > "$tmp/client" <<'PY'
#!/usr/bin/python3
import http.client, os, statistics, time
host, port = os.environ["MODEL"].split(":")
import socket
c = http.client.HTTPConnection(host, int(port), timeout=30)
c.connect()
c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the clients' runtimes do
times = []
for i in range(500):
    t = time.perf_counter()
    c.request("POST", "/v1/messages", body=b'{"model":"m","max_tokens":1}', headers={"x-api-key": "token"})
    r = c.getresponse(); r.read()
    times.append((time.perf_counter() - t) * 1000)
times.sort()
t = time.perf_counter()
c.request("GET", "/big"); r = c.getresponse(); n = len(r.read())
mbs = n / (1 << 20) / (time.perf_counter() - t)
t = time.perf_counter()
c.request("GET", "/sse"); r = c.getresponse(); r.read(1)
first = (time.perf_counter() - t) * 1000
r.read()
print(f"RESULT p50 {statistics.median(times):.3f} ms, p99 {times[494]:.3f} ms, {mbs:.0f} MiB/s, first event {first:.1f} ms", flush=True)
PY
chmod 755 "$tmp/client"

"$bin" render codex --agent-id a1 --launch-dir "$tmp/launch" --worktree "$tmp/worktree" \
  --format plan > "$tmp/base.json"
plan() { # door|direct
  python3 - "$tmp/base.json" "$1" "$port" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); how, port = sys.argv[2], sys.argv[3]
p["argv"] = []
p["env"].append({"name": "MODEL", "value": "127.0.0.1:41001" if how == "door" else f"127.0.0.1:{port}"})
if how == "door":
    p["door"] = {"endpoints": [{"port": 41001, "upstream": f"127.0.0.1:{port}", "serves": "model API",
                                "credential": {"header": "x-api-key", "value": "sk-daemon-key"}}]}
print(json.dumps(p))
PY
}
plan door > "$tmp/door.json"
plan direct > "$tmp/direct.json"
for round in 1 2 3; do
  for how in direct door; do
    rm -rf "$tmp/launch" "$tmp/.launch.kcap-lock"
    "$bin" launch --plan "$tmp/$how.json" --client-bin "$tmp/client" --timeout 120 > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
    line=$(grep RESULT "$tmp/out" || { cat "$tmp/out" >&2; exit 1; })
    printf '%-6s round %s: %s\n' "$how" "$round" "${line#*RESULT }"
  done
done
