#!/usr/bin/env bash
# The reviewer's door beside a direct connection, in one run (BENCHMARKS.md, "The door"): a
# stand-in client started by `launch --plan` (sandbox on) sends 500 small model-API requests on
# one keep-alive connection and reads a 64 MiB answer and a streamed answer, once through the
# door (the plan's `door`: the stand-in upstream on the host, the key set by the door on each
# request) and once straight to the upstream. It prints per-request latency (p50, p99), the
# throughput and the time to the first event of the stream. The same again to a TLS stand-in
# (`https`): straight, the client speaks TLS to it; through the door (`"scheme": "https"`), the
# client speaks plain HTTP to the door and the door TLS to the upstream, trusting a CA made for
# the run (openssl) through SSL_CERT_FILE in the executor's environment.
#
#   scripts/bench-door.sh BIN
#
# Needs python3 and openssl. Nothing leaves 127.0.0.1.
set -euo pipefail
bin=${1:?usage: bench-door.sh BIN}
tmp=$(mktemp -d)
trap 'kill "$upstream_pid" "$tls_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worktree"
# A CA for this run and a certificate for `localhost` (in the worktree: the sandboxed client
# reads the CA there when it speaks TLS itself).
ca=$tmp/worktree/ca.pem
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -keyout "$tmp/ca.key" -out "$ca" -subj "/CN=kcap bench CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$tmp/leaf.key" -out "$tmp/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
  > "$tmp/leaf.ext"
openssl x509 -req -in "$tmp/leaf.csr" -CA "$ca" -CAkey "$tmp/ca.key" -CAcreateserial -days 2 \
  -extfile "$tmp/leaf.ext" -out "$tmp/leaf.pem" 2>/dev/null

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
if len(sys.argv) > 1:  # TLS: certificate and key
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$tmp/upstream.py" > "$tmp/port" &
upstream_pid=$!
python3 "$tmp/upstream.py" "$tmp/leaf.pem" "$tmp/leaf.key" > "$tmp/tls_port" &
tls_pid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && [ -s "$tmp/tls_port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
tls_port=$(cat "$tmp/tls_port")

cat > "$tmp/client" <<'PY'
#!/usr/bin/python3
import http.client, os, statistics, time
host, port = os.environ["MODEL"].split(":")
import socket
if "CA" in os.environ:  # straight to the TLS upstream
    import ssl
    ctx = ssl.create_default_context(cafile=os.environ["CA"])
    c = http.client.HTTPSConnection(host, int(port), timeout=30, context=ctx)
else:
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
plan() { # door|direct|door-tls|direct-tls
  python3 - "$tmp/base.json" "$1" "$port" "$tls_port" "$ca" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); how, port, tls_port, ca = sys.argv[2:6]
p["argv"] = []
direct = {"direct": f"127.0.0.1:{port}", "direct-tls": f"localhost:{tls_port}"}
p["env"].append({"name": "MODEL", "value": direct.get(how, "127.0.0.1:41001")})
if how == "direct-tls":
    p["env"].append({"name": "CA", "value": ca})
if how.startswith("door"):
    endpoint = {"port": 41001, "upstream": f"127.0.0.1:{port}", "serves": "model API",
                "credential": {"header": "x-api-key", "value": "sk-daemon-key"}}
    if how == "door-tls":
        endpoint.update(upstream=f"localhost:{tls_port}", scheme="https")
    p["door"] = {"endpoints": [endpoint]}
print(json.dumps(p))
PY
}
for how in door direct door-tls direct-tls; do plan "$how" > "$tmp/$how.json"; done
for round in 1 2 3; do
  for how in direct door direct-tls door-tls; do
    rm -rf "$tmp/launch" "$tmp/.launch.kcap-lock"
    SSL_CERT_FILE=$ca "$bin" launch --plan "$tmp/$how.json" --client-bin "$tmp/client" --timeout 120 --door-keyed-burst 1000 > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
    line=$(grep RESULT "$tmp/out" || { cat "$tmp/out" >&2; exit 1; })
    printf '%-10s round %s: %s\n' "$how" "$round" "${line#*RESULT }"
  done
done
