#!/usr/bin/env bash
# The reviewer's sandbox, on and off, side by side in one run (BENCHMARKS.md, "The sandbox"):
# `launch --plan` of a stand-in ACP client (handshake, prompt, answer, stop), then of each
# installed real client's `--version` in a pseudo-terminal, each with `--sandbox required`
# and `--sandbox off`.
#
#   scripts/bench-sandbox.sh BIN
#
# Needs hyperfine and python3; the real clients come from the KCAP_*_BIN variables that
# `scripts/install-peers.sh` prints (those unset are left out). Nothing contacts a model.
set -euo pipefail
bin=${1:?usage: bench-sandbox.sh BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worktree"

handshake='read -r _
printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}"
read -r _
printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s1\"}}"'
printf '#!/bin/sh\n%s\nread -r _\nprintf "%%s\\n" "{\\"jsonrpc\\":\\"2.0\\",\\"id\\":3,\\"result\\":{\\"stopReason\\":\\"end_turn\\"}}"\n' "$handshake" > "$tmp/answers"
chmod 755 "$tmp/answers"

"$bin" render gemini --agent-id a1 --launch-dir "$tmp/launch" --worktree "$tmp/worktree" \
  --format plan > "$tmp/acp.json"
# A terminal plan whose argv is `--version`: the client starts, prints and exits.
"$bin" render codex --agent-id a1 --launch-dir "$tmp/launch" --worktree "$tmp/worktree" \
  --format plan | python3 -c 'import json,sys; p=json.load(sys.stdin); p["argv"]=["--version"]; print(json.dumps(p))' \
  > "$tmp/version.json"

run() { # name plan client extra…
  local name=$1 plan=$2 client=$3; shift 3
  hyperfine --warmup 2 --runs "${RUNS:-20}" -N --style basic \
    --prepare "rm -rf $tmp/launch $tmp/.launch.kcap-lock" \
    -n "$name off" "$bin launch --plan $plan --client-bin $client --sandbox off --timeout 60 $*" \
    -n "$name required" "$bin launch --plan $plan --client-bin $client --sandbox required --timeout 60 $*"
}

echo "== a stand-in ACP client: handshake, prompt, answer, stop"
run stand-in "$tmp/acp.json" "$tmp/answers" --prompt review
for var in KCAP_CLAUDE_BIN KCAP_CLAUDE_NEXT_BIN KCAP_CODEX_BIN KCAP_CODEX_NEXT_BIN KCAP_GEMINI_BIN KCAP_OPENCODE_BIN \
  KCAP_COPILOT_BIN KCAP_QWEN_BIN; do
  client=${!var:-}
  [ -n "$client" ] || continue
  extra=()
  # Copilot CLI's npm launcher runs the package it unpacked into the cache.
  if [ "$var" = KCAP_COPILOT_BIN ] && [ -n "${KCAP_COPILOT_CACHE:-}" ]; then
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["env"].append({"name":"COPILOT_PKG_CACHE_HOME","value":sys.argv[2]+"/copilot"}); print(json.dumps(p))' \
      "$tmp/version.json" "$KCAP_COPILOT_CACHE" > "$tmp/copilot.json"
    echo "== $var --version"
    run "${var#KCAP_}" "$tmp/copilot.json" "$client" --sandbox-exec "$KCAP_COPILOT_CACHE"
    continue
  fi
  echo "== $var --version"
  run "${var#KCAP_}" "$tmp/version.json" "$client" "${extra[@]}"
done
