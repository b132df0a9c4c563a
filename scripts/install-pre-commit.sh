#!/usr/bin/env bash
# Installs pre-commit (pinned) into .peers/pre-commit (git-ignored), a virtual environment of
# its own, for tests/ci_snippets.rs, which runs the pre-commit configs of docs/ci.md.
# Idempotent: nothing is installed when it already reports the pinned version. Needs
# python3 with the venv module and a reachable PyPI. Prints the path, ready to export:
#   KCAP_PRE_COMMIT_BIN=…
set -euo pipefail

PRE_COMMIT_VERSION=4.7.0

root="$(cd "$(dirname "$0")/.." && pwd -P)"
venv="$root/.peers/pre-commit"
bin="$venv/bin/pre-commit"

if [ "$("$bin" --version 2>/dev/null || true)" != "pre-commit $PRE_COMMIT_VERSION" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "pre-commit==$PRE_COMMIT_VERSION" >&2
fi
version="$("$bin" --version)"
[ "$version" = "pre-commit $PRE_COMMIT_VERSION" ] || {
    echo "install-pre-commit: error: $bin reports '$version', not pre-commit $PRE_COMMIT_VERSION" >&2
    exit 1
}
echo "KCAP_PRE_COMMIT_BIN=$bin"
