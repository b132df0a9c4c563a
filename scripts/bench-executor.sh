#!/usr/bin/env bash
# The executor under a hostile ACP client, two builds side by side (BENCHMARKS.md, "The
# executor under faults"): peak RSS of `launch --plan` when the client writes one 100 MiB line
# without a newline, and the time of a whole ordinary launch (handshake, prompt, answer).
#
#   scripts/bench-executor.sh OLD_BIN NEW_BIN
#
# Needs /usr/bin/time (GNU) and hyperfine. Stand-ins are shell scripts; nothing else runs.
set -euo pipefail
old=${1:?usage: bench-executor.sh OLD_BIN NEW_BIN}
new=${2:?usage: bench-executor.sh OLD_BIN NEW_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worktree"

handshake='read -r _
printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}"
read -r _
printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s1\"}}"'
printf '#!/bin/sh\n%s\nhead -c 104857600 /dev/zero | tr "\\0" x\necho\nexit 0\n' "$handshake" > "$tmp/huge"
printf '#!/bin/sh\n%s\nread -r _\nprintf "%%s\\n" "{\\"jsonrpc\\":\\"2.0\\",\\"id\\":3,\\"result\\":{\\"stopReason\\":\\"end_turn\\"}}"\nsleep 0.05\n' "$handshake" > "$tmp/answers"
chmod 755 "$tmp/huge" "$tmp/answers"

"$new" render gemini --agent-id a1 --launch-dir "$tmp/launch" --worktree "$tmp/worktree" \
  --format plan > "$tmp/plan.json"

echo "== peak RSS, a 100 MiB line without a newline (KiB; 3 runs each)"
for label in old new; do
  bin=$old; [ "$label" = new ] && bin=$new
  for _ in 1 2 3; do
    /usr/bin/time -f "$label %M KiB %e s" "$bin" launch --plan "$tmp/plan.json" \
      --client-bin "$tmp/huge" --prompt review --timeout 30 > /dev/null 2> "$tmp/time" || true
    tail -n 1 "$tmp/time"
    rm -rf "$tmp/launch" "$tmp/.launch.lock"
  done
  grep -m1 -o 'error: .*' "$tmp/time" | cut -c1-160 || true
done

echo "== an ordinary launch: handshake, prompt, answer"
hyperfine --warmup 3 --runs 30 -N \
  --prepare "rm -rf $tmp/launch $tmp/.launch.lock" \
  -n old "$old launch --plan $tmp/plan.json --client-bin $tmp/answers --prompt review --timeout 30" \
  -n new "$new launch --plan $tmp/plan.json --client-bin $tmp/answers --prompt review --timeout 30"
