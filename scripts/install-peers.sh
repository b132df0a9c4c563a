#!/usr/bin/env bash
# Installs the real clients the conformance tests run against into .peers/ (git-ignored):
#   @openai/codex@0.169.0             -> .peers/node_modules/.bin/codex
#   @anthropic-ai/claude-code@2.1.197 -> .peers/node_modules/.bin/claude
# Both binaries ship inside the npm packages (and their per-platform optional dependencies);
# nothing else is downloaded. Idempotent: when both binaries already report their pinned
# versions, nothing is installed. Fails loudly when either binary is missing or reports
# another version. Prints the two binary paths, ready to export:
#   KCAP_CODEX_BIN=…
#   KCAP_CLAUDE_BIN=…
# Needs node and npm on PATH. Never contacts a model: every version check runs with a
# throwaway HOME and CODEX_HOME.
set -euo pipefail

CODEX_VERSION=0.169.0
CLAUDE_VERSION=2.1.197

root="$(cd "$(dirname "$0")/.." && pwd -P)"
peers="$root/.peers"
codex_bin="$peers/node_modules/.bin/codex"
claude_bin="$peers/node_modules/.bin/claude"

die() {
    echo "install-peers: error: $*" >&2
    exit 1
}

# Prints the first line `BIN --version` writes, run offline-safe in a throwaway home.
version_of() {
    local bin="$1" home out
    [ -x "$bin" ] || return 1
    home="$(mktemp -d)"
    out="$(env -u RUST_BACKTRACE HOME="$home" CODEX_HOME="$home" \
        timeout 60 "$bin" --version </dev/null 2>/dev/null | head -n 1)" || true
    rm -rf "$home"
    printf '%s' "$out"
}

codex_ok() { [ "$(version_of "$codex_bin")" = "codex-cli $CODEX_VERSION" ]; }
claude_ok() { [ "$(version_of "$claude_bin")" = "$CLAUDE_VERSION (Claude Code)" ]; }

command -v npm >/dev/null || die "npm is not on PATH; install Node.js (>= 18) and npm first"
command -v node >/dev/null || die "node is not on PATH; install Node.js (>= 18) first"

if codex_ok && claude_ok; then
    echo "install-peers: codex $CODEX_VERSION and claude $CLAUDE_VERSION already in $peers" >&2
else
    echo "install-peers: installing @openai/codex@$CODEX_VERSION and @anthropic-ai/claude-code@$CLAUDE_VERSION into $peers" >&2
    mkdir -p "$peers"
    # --no-save: the repo has no package.json and gets none; .peers/ is git-ignored.
    npm install --prefix "$peers" --no-save --no-audit --no-fund --no-package-lock \
        --loglevel=error \
        "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2 \
        || die "npm install failed (see above)"
    # Claude Code's bin/claude.exe is a 500-byte stub until its postinstall (install.cjs)
    # links the native binary from the platform package npm just installed. npm 11 warns that
    # install scripts are "not yet covered by allowScripts" (npm 11.19 still runs them); where
    # npm is configured not to run them, run that postinstall ourselves. It downloads nothing.
    if ! claude_ok && [ -f "$peers/node_modules/@anthropic-ai/claude-code/install.cjs" ]; then
        echo "install-peers: claude's postinstall did not run; running install.cjs" >&2
        (cd "$peers/node_modules/@anthropic-ai/claude-code" && node install.cjs) >&2 \
            || die "claude's install.cjs failed (see above)"
    fi
fi

got="$(version_of "$codex_bin" || true)"
[ "$got" = "codex-cli $CODEX_VERSION" ] \
    || die "$codex_bin reports '${got:-nothing}', expected 'codex-cli $CODEX_VERSION'; delete $peers and rerun"
got="$(version_of "$claude_bin" || true)"
[ "$got" = "$CLAUDE_VERSION (Claude Code)" ] \
    || die "$claude_bin reports '${got:-nothing}', expected '$CLAUDE_VERSION (Claude Code)'; delete $peers and rerun"

echo "KCAP_CODEX_BIN=$codex_bin"
echo "KCAP_CLAUDE_BIN=$claude_bin"

# The ACP clients (Gemini CLI, OpenCode) have their own script and npm prefixes.
bash "$root/scripts/install-acp-peers.sh"
