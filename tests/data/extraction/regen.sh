#!/usr/bin/env bash
# Rebuilds the extraction corpus (see README.md): writes small throwaway projects under
# $AF_EXTRACTION_WORK (default /tmp/af-extraction), runs the real tools on them, and
# rewrites <tool>/<case>.txt and <case>.truth.json here. `--only TOOL` (repeatable) limits
# it to some tools.
#
# Needs: python3, pytest, ruff, flake8, mypy (pip), cargo with clippy, cargo-nextest, go,
# shellcheck, node and npm. The JS tools are installed once into $AF_JSDEPS (default
# $AF_EXTRACTION_WORK/jsdeps) at the versions below.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${AF_EXTRACTION_WORK:-/tmp/af-extraction}"
export AF_EXTRACTION_WORK="$work"
export AF_JSDEPS="${AF_JSDEPS:-$work/jsdeps}"

missing=()
for tool in python3 pytest ruff flake8 mypy cargo cargo-clippy cargo-nextest rustc go shellcheck node npm; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "regen.sh: missing tools: ${missing[*]}" >&2
    echo "  pip install pytest ruff flake8 mypy; apt-get install golang shellcheck; cargo install cargo-nextest" >&2
    exit 1
fi
if [ ! -x "$AF_JSDEPS/node_modules/.bin/vitest" ]; then
    mkdir -p "$AF_JSDEPS"
    (cd "$AF_JSDEPS" && [ -f package.json ] || echo '{"private": true}' > "$AF_JSDEPS/package.json")
    npm install --prefix "$AF_JSDEPS" --no-audit --no-fund jest@30 vitest@4 eslint@10 typescript@7 >&2
fi
exec python3 "$here/regen.py" "$@"
