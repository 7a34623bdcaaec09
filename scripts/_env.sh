# Sourced by the scripts here: makes .venv with loopgate and its test extras installed.
# Re-installs only when pyproject.toml changed, so repeated runs start fast.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "loopgate needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv

ensure_python_deps() {  # $1: the extras to install, e.g. "" or "[test]"
  local stamp=".venv/.installed$1" want
  want="$(sha256sum pyproject.toml | cut -c1-16)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$1"
    echo "$want" > "$stamp"
  fi
}
