#!/usr/bin/env bash
# Installs the ACP clients the conformance tests run against, each into its own npm prefix
# under .peers/ (git-ignored), so that neither install prunes the other's packages nor those
# of scripts/install-peers.sh:
#   @google/gemini-cli@0.61.0 -> .peers/gemini/node_modules/.bin/gemini
#   opencode-ai@1.18.33       -> .peers/opencode/node_modules/.bin/opencode
# (KCAP_PEERS_DIR, when set, replaces .peers.) The OpenCode binary ships inside its
# per-platform optional npm dependency; nothing else is downloaded. Idempotent: a client that
# already reports its pinned version is not installed again. Fails loudly when a binary is
# missing or reports another version. Prints the two binary paths, ready to export:
#   KCAP_GEMINI_BIN=…
#   KCAP_OPENCODE_BIN=…
# Needs node (>= 20) and npm on PATH. Every version check runs with a throwaway HOME and XDG
# directories; none contacts a model.
set -euo pipefail

GEMINI_VERSION=0.61.0
OPENCODE_VERSION=1.18.33

root="$(cd "$(dirname "$0")/.." && pwd -P)"
peers="${KCAP_PEERS_DIR:-$root/.peers}"
gemini_bin="$peers/gemini/node_modules/.bin/gemini"
opencode_bin="$peers/opencode/node_modules/.bin/opencode"

die() {
    echo "install-acp-peers: error: $*" >&2
    exit 1
}

# Prints the last line `BIN --version` writes, run in a throwaway home.
version_of() {
    local bin="$1" home out
    [ -x "$bin" ] || return 1
    home="$(mktemp -d)"
    out="$(env -u RUST_BACKTRACE HOME="$home" XDG_CONFIG_HOME="$home/.config" \
        XDG_DATA_HOME="$home/.local/share" XDG_CACHE_HOME="$home/.cache" \
        XDG_STATE_HOME="$home/.local/state" \
        timeout 60 "$bin" --version </dev/null 2>/dev/null | tail -n 1)" || true
    rm -rf "$home"
    printf '%s' "$out"
}

# install NAME PACKAGE VERSION BIN
install() {
    local name="$1" package="$2" version="$3" bin="$4" got
    if [ "$(version_of "$bin" || true)" = "$version" ]; then
        echo "install-acp-peers: $name $version already in $peers/$name" >&2
    else
        echo "install-acp-peers: installing $package@$version into $peers/$name" >&2
        mkdir -p "$peers/$name"
        # The prefix gets a package.json of its own: without one, npm looks for the project
        # root in the parent directories and prunes the packages it finds there (the other
        # clients' in .peers/). --no-save leaves it empty; .peers/ is git-ignored.
        [ -f "$peers/$name/package.json" ] \
            || printf '{ "private": true }\n' >"$peers/$name/package.json"
        npm install --prefix "$peers/$name" --no-save --no-audit --no-fund --no-package-lock \
            --loglevel=error "$package@$version" >&2 \
            || die "npm install $package@$version failed (see above)"
    fi
    got="$(version_of "$bin" || true)"
    [ "$got" = "$version" ] \
        || die "$bin reports '${got:-nothing}', expected '$version'; delete $peers/$name and rerun"
}

command -v npm >/dev/null || die "npm is not on PATH; install Node.js (>= 20) and npm first"
command -v node >/dev/null || die "node is not on PATH; install Node.js (>= 20) first"

install gemini @google/gemini-cli "$GEMINI_VERSION" "$gemini_bin"
install opencode opencode-ai "$OPENCODE_VERSION" "$opencode_bin"

echo "KCAP_GEMINI_BIN=$gemini_bin"
echo "KCAP_OPENCODE_BIN=$opencode_bin"
