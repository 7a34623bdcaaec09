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
if [ ! -x .venv/bin/python ]; then
  echo "loopgate: creating .venv (first run only)" >&2
  "$PYTHON" -m venv .venv
fi

ensure_python_deps() {  # $1: the extras to install, e.g. "" or "[test]"; $2: extras that hold them
  local stamp=".venv/.installed$1" want started
  want="$(sha256sum pyproject.toml | cut -c1-16)"
  # Installed with extras that include these (scripts/test's): nothing to do. A second install
  # would also replace the package under any loopgate process running from this .venv.
  if [ -n "${2:-}" ] && [ "$(cat ".venv/.installed$2" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # Say what the wait is for: a first install takes from half a minute to a few minutes.
    echo "loopgate: installing loopgate${1} and its dependencies into .venv" \
      "(first run, or pyproject.toml changed; about a minute)…" >&2
    started=$SECONDS
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$1" >&2
    echo "loopgate: installed in $((SECONDS - started)) s" >&2
    echo "$want" > "$stamp"
  fi
}
