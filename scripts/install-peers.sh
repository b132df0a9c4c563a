#!/usr/bin/env bash
# Installs the real clients the conformance tests run against into .peers/ (git-ignored):
#   @openai/codex@0.169.0             -> .peers/node_modules/.bin/codex
#   @openai/codex@0.171.0             -> .peers/codex-0.171.0/node_modules/.bin/codex
#     (the newest Codex CLI, in a prefix of its own so both versions coexist)
#   @anthropic-ai/claude-code@2.1.197 -> .peers/node_modules/.bin/claude
#   @anthropic-ai/claude-code@2.1.332 -> .peers/claude-2.1.332/node_modules/.bin/claude
#     (the newest Claude Code, in a prefix of its own so both versions coexist)
#   @google/gemini-cli@0.61.0         -> .peers/gemini/node_modules/.bin/gemini
#   opencode-ai@1.18.33               -> .peers/opencode/node_modules/.bin/opencode
#   @github/copilot@1.0.102           -> .peers/copilot/node_modules/.bin/copilot
#   @qwen-code/qwen-code@0.24.4       -> .peers/qwen/node_modules/.bin/qwen
#     (its engines field asks for node >= 22; npm warns EBADENGINE on node 20, and every
#     run measured here, and the tests, work on node 20.20.2)
#     (each in its own prefix with its own package.json, so no install prunes another's
#     packages; Copilot's first run unpacks ~235 MB into $XDG_CACHE_HOME/copilot/pkg, so the
#     script pre-warms one shared cache, .peers/copilot-cache, for every test run)
# Every binary ships inside its npm package (and its per-platform optional dependencies);
# nothing else is downloaded. Idempotent: when every binary already reports its pinned
# version, nothing is installed. Fails loudly when any binary is missing or reports
# another version. Prints the binary paths, ready to export:
#   KCAP_CODEX_BIN=…  KCAP_CODEX_NEXT_BIN=…
#   KCAP_CLAUDE_BIN=…  KCAP_CLAUDE_NEXT_BIN=…
#   KCAP_GEMINI_BIN=…  KCAP_OPENCODE_BIN=…  KCAP_COPILOT_BIN=…  KCAP_COPILOT_CACHE=…
#   KCAP_QWEN_BIN=…
#   KCAP_PRE_COMMIT_BIN=… (pre-commit 4.7.0 for tests/clients/ci_snippets.rs, by install-pre-commit.sh)
# Needs node and npm on PATH. Never contacts a model: every version check runs with a
# throwaway HOME and CODEX_HOME.
set -euo pipefail

CODEX_VERSION=0.169.0
CODEX_NEXT_VERSION=0.171.0
CLAUDE_VERSION=2.1.197
CLAUDE_NEXT_VERSION=2.1.332
GEMINI_VERSION=0.61.0
OPENCODE_VERSION=1.18.33
COPILOT_VERSION=1.0.102
QWEN_VERSION=0.24.4

root="$(cd "$(dirname "$0")/.." && pwd -P)"
peers="$root/.peers"
codex_bin="$peers/node_modules/.bin/codex"
claude_bin="$peers/node_modules/.bin/claude"
claude_next_prefix="$peers/claude-$CLAUDE_NEXT_VERSION"
claude_next_bin="$claude_next_prefix/node_modules/.bin/claude"
codex_next_prefix="$peers/codex-$CODEX_NEXT_VERSION"
codex_next_bin="$codex_next_prefix/node_modules/.bin/codex"

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
claude_next_ok() { [ "$(version_of "$claude_next_bin")" = "$CLAUDE_NEXT_VERSION (Claude Code)" ]; }
codex_next_ok() { [ "$(version_of "$codex_next_bin")" = "codex-cli $CODEX_NEXT_VERSION" ]; }

# Claude Code's bin/claude.exe is a 500-byte stub until its postinstall (install.cjs) links
# the native binary from the platform package npm just installed. npm 11 warns that install
# scripts are "not yet covered by allowScripts" (npm 11.19 still runs them); where npm is
# configured not to run them, run that postinstall ourselves. It downloads nothing.
claude_postinstall() {
    local prefix="$1"
    if [ -f "$prefix/node_modules/@anthropic-ai/claude-code/install.cjs" ]; then
        echo "install-peers: claude's postinstall did not run in $prefix; running install.cjs" >&2
        (cd "$prefix/node_modules/@anthropic-ai/claude-code" && node install.cjs) >&2 \
            || die "claude's install.cjs in $prefix failed (see above)"
    fi
}

command -v npm >/dev/null || die "npm is not on PATH; install Node.js (>= 18) and npm first"
command -v node >/dev/null || die "node is not on PATH; install Node.js (>= 18) first"

# Each install goes to a prefix of its own, so they run at once (npm's cache is safe for
# concurrent use); each job's output goes to stderr, each failure ends the script after all
# jobs have finished.
install_main() {
    if codex_ok && claude_ok; then
        echo "install-peers: codex $CODEX_VERSION and claude $CLAUDE_VERSION already in $peers" >&2
        return
    fi
    echo "install-peers: installing @openai/codex@$CODEX_VERSION and @anthropic-ai/claude-code@$CLAUDE_VERSION into $peers" >&2
    mkdir -p "$peers"
    # --no-save: the repo has no package.json and gets none; .peers/ is git-ignored.
    npm install --prefix "$peers" --no-save --no-audit --no-fund --no-package-lock \
        --loglevel=error \
        "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2 \
        || die "npm install failed (see above)"
    claude_ok || claude_postinstall "$peers"
}

install_claude_next() {
    if claude_next_ok; then
        echo "install-peers: claude $CLAUDE_NEXT_VERSION already in $claude_next_prefix" >&2
        return
    fi
    echo "install-peers: installing @anthropic-ai/claude-code@$CLAUDE_NEXT_VERSION into $claude_next_prefix" >&2
    mkdir -p "$claude_next_prefix"
    npm install --prefix "$claude_next_prefix" --no-save --no-audit --no-fund --no-package-lock \
        --loglevel=error "@anthropic-ai/claude-code@$CLAUDE_NEXT_VERSION" >&2 \
        || die "npm install failed (see above)"
    claude_next_ok || claude_postinstall "$claude_next_prefix"
}

install_codex_next() {
    if codex_next_ok; then
        echo "install-peers: codex $CODEX_NEXT_VERSION already in $codex_next_prefix" >&2
        return
    fi
    echo "install-peers: installing @openai/codex@$CODEX_NEXT_VERSION into $codex_next_prefix" >&2
    mkdir -p "$codex_next_prefix"
    npm install --prefix "$codex_next_prefix" --no-save --no-audit --no-fund --no-package-lock \
        --loglevel=error "@openai/codex@$CODEX_NEXT_VERSION" >&2 \
        || die "npm install failed (see above)"
}

# prefixed NAME PACKAGE VERSION: installs PACKAGE@VERSION into .peers/NAME, a prefix with its
# own package.json (npm never walks up to another prefix), unless its binary already prints
# VERSION first in `--version`.
prefixed() {
    local name="$1" package="$2" version="$3" prefix="$peers/$1" bin="$peers/$1/node_modules/.bin/$1" got
    got="$(version_of "$bin" | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1 || true)"
    if [ "$got" = "$version" ]; then
        echo "install-peers: $name $version already in $prefix" >&2
        return
    fi
    echo "install-peers: installing $package@$version into $prefix" >&2
    mkdir -p "$prefix"
    printf '{\n  "private": true,\n  "dependencies": {\n    "%s": "%s"\n  }\n}\n' \
        "$package" "$version" > "$prefix/package.json"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error >&2 \
        || die "npm install $package@$version in $prefix failed (see above)"
}

gemini_bin="$peers/gemini/node_modules/.bin/gemini"
opencode_bin="$peers/opencode/node_modules/.bin/opencode"
copilot_bin="$peers/copilot/node_modules/.bin/copilot"
qwen_bin="$peers/qwen/node_modules/.bin/qwen"
copilot_cache="$peers/copilot-cache"

# Copilot, then its package cache pre-warmed (its first run unpacks it); offline, in a
# throwaway home.
install_copilot() {
    prefixed copilot @github/copilot "$COPILOT_VERSION"
    mkdir -p "$copilot_cache"
    local home
    home="$(mktemp -d)"
    env -i PATH="$PATH" HOME="$home" XDG_CACHE_HOME="$copilot_cache" COPILOT_OFFLINE=true \
        COPILOT_AUTO_UPDATE=false timeout 300 "$copilot_bin" mcp list --json </dev/null >/dev/null 2>&1 \
        || die "$copilot_bin mcp list --json failed while unpacking into $copilot_cache"
    rm -rf "$home"
}

mkdir -p "$peers"
# pre-commit (PyPI, a virtual environment of its own), for tests/clients/ci_snippets.rs; its line
# for stdout waits in a file until the end.
pre_commit_line="$(mktemp)"
trap 'rm -f "$pre_commit_line"' EXIT
jobs=()
install_main & jobs+=($!)
install_claude_next & jobs+=($!)
install_codex_next & jobs+=($!)
prefixed gemini @google/gemini-cli "$GEMINI_VERSION" & jobs+=($!)
prefixed opencode opencode-ai "$OPENCODE_VERSION" & jobs+=($!)
install_copilot & jobs+=($!)
prefixed qwen @qwen-code/qwen-code "$QWEN_VERSION" & jobs+=($!)
bash "$root/scripts/install-pre-commit.sh" > "$pre_commit_line" & jobs+=($!)
failed=0
for job in "${jobs[@]}"; do
    wait "$job" || failed=1
done
[ "$failed" = 0 ] || die "an install failed (see above)"

got="$(version_of "$codex_bin" || true)"
[ "$got" = "codex-cli $CODEX_VERSION" ] \
    || die "$codex_bin reports '${got:-nothing}', expected 'codex-cli $CODEX_VERSION'; delete $peers and rerun"
got="$(version_of "$claude_bin" || true)"
[ "$got" = "$CLAUDE_VERSION (Claude Code)" ] \
    || die "$claude_bin reports '${got:-nothing}', expected '$CLAUDE_VERSION (Claude Code)'; delete $peers and rerun"
got="$(version_of "$claude_next_bin" || true)"
[ "$got" = "$CLAUDE_NEXT_VERSION (Claude Code)" ] \
    || die "$claude_next_bin reports '${got:-nothing}', expected '$CLAUDE_NEXT_VERSION (Claude Code)'; delete $claude_next_prefix and rerun"
got="$(version_of "$codex_next_bin" || true)"
[ "$got" = "codex-cli $CODEX_NEXT_VERSION" ] \
    || die "$codex_next_bin reports '${got:-nothing}', expected 'codex-cli $CODEX_NEXT_VERSION'; delete $codex_next_prefix and rerun"

echo "KCAP_CODEX_BIN=$codex_bin"
echo "KCAP_CLAUDE_BIN=$claude_bin"
for pair in "gemini:$GEMINI_VERSION" "opencode:$OPENCODE_VERSION" "copilot:$COPILOT_VERSION" "qwen:$QWEN_VERSION"; do
    name="${pair%%:*}" version="${pair#*:}"
    got="$(version_of "$peers/$name/node_modules/.bin/$name" | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1 || true)"
    [ "$got" = "$version" ] \
        || die "$peers/$name/node_modules/.bin/$name reports '${got:-nothing}', expected '$version'; delete $peers/$name and rerun"
done

echo "KCAP_CLAUDE_NEXT_BIN=$claude_next_bin"
echo "KCAP_CODEX_NEXT_BIN=$codex_next_bin"
echo "KCAP_GEMINI_BIN=$gemini_bin"
echo "KCAP_OPENCODE_BIN=$opencode_bin"
echo "KCAP_COPILOT_BIN=$copilot_bin"
echo "KCAP_COPILOT_CACHE=$copilot_cache"
echo "KCAP_QWEN_BIN=$qwen_bin"
cat "$pre_commit_line"
