# shellcheck shell=bash
# The project's Python environment: a virtual environment of Debian's
# Python 3.11 with exactly tools/python-requirements.txt, shared by the
# README's commands, the tests and the benchmarks. It lives outside the
# checkout, named by a hash of the requirements (so every checkout with the
# same pins shares one, and changing a pin makes a new one), and the
# checkout's .venv links to it. Sourced; defines:
#
#   KOLO_VENV      the environment's folder (KOLO_VENV_ROOT/<hash>)
#   KOLO_PYTHON    its interpreter
#   kolo_python_env_make   creates it unless it is complete (tools/setup.sh)
#   kolo_python_env_consistent  pip check, tensorflow-cpu standing for tensorflow
#   kolo_python_env_check  fails, saying what to run, unless it is complete
#
# KOLO_VENV_ROOT defaults to /var/tmp/kolo-python. A test finds the same
# folder from its runfiles' copy of the requirements file.
KOLO_PYTHON_BASE=/usr/bin/python3
KOLO_REQUIREMENTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python-requirements.txt"
KOLO_VENV="${KOLO_VENV_ROOT:-/var/tmp/kolo-python}/$(
  { cat "$KOLO_REQUIREMENTS"; "$KOLO_PYTHON_BASE" --version 2>&1; } | sha256sum | cut -c1-16)"
KOLO_PYTHON="$KOLO_VENV/bin/python"
# Written last: an environment without it was interrupted while being made.
KOLO_VENV_DONE="$KOLO_VENV/.complete"

kolo_python_env_make() {
  [ -f "$KOLO_VENV_DONE" ] && return 0
  echo "setup: making the Python environment $KOLO_VENV (tools/python-requirements.txt)" >&2
  local log
  log="$(mktemp)"
  rm -rf "$KOLO_VENV"
  mkdir -p "$(dirname "$KOLO_VENV")"
  # pip's own output goes to a log, shown only if something failed.
  if "$KOLO_PYTHON_BASE" -m venv "$KOLO_VENV" >"$log" 2>&1 &&
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$KOLO_PYTHON" -m pip install --no-deps --no-input -q \
      -r "$KOLO_REQUIREMENTS" >>"$log" 2>&1 &&
    kolo_python_env_consistent >>"$log" 2>&1; then
    touch "$KOLO_VENV_DONE"
    rm -f "$log"
    return 0
  fi
  cat "$log" >&2
  rm -f "$log"
  echo "setup: could not make the Python environment $KOLO_VENV (pip's output above)" >&2
  return 1
}

# pip check, but for what tensorflow-cpu provides: packages whose metadata
# ask for `tensorflow` (tf_keras) get the CPU build, which pip cannot know
# to be the same.
kolo_python_env_consistent() {
  local problems
  problems=$("$KOLO_PYTHON" -m pip check 2>&1 | grep -v '^No broken requirements found' |
    grep -v ' requires tensorflow, which is not installed\.$')
  [ -z "$problems" ] || { echo "$problems"; return 1; }
  "$KOLO_PYTHON" -m pip show -q tensorflow-cpu >/dev/null
}

kolo_python_env_check() {
  [ -f "$KOLO_VENV_DONE" ] && return 0
  echo "no Python environment at $KOLO_VENV: run tools/setup.sh (it makes it from tools/python-requirements.txt)" >&2
  return 1
}
