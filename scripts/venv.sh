#!/usr/bin/env bash
# The Python environment of the repository's scripts: a virtual environment in the checkout (.venv), so
# that scripts/demo.sh, scripts/test.sh and scripts/install_deps.sh never install into the machine's Python
# (they work where the system Python is externally managed, PEP 668) and never change what other programs
# on the machine see.
#
#   . scripts/venv.sh        (from a script, or your shell) makes .venv when it is missing and activates it:
#                            python3, python and pip are the venv's from then on
#   scripts/venv.sh          makes it and says where it is (then `. .venv/bin/activate` to use it yourself)
#
# The venv is made with --system-site-packages: what the machine already has (a system-wide torch, JAX or
# CuPy, say, on a GPU machine without network access) stays importable, and pip installs into the venv only
# what is missing or too old; nothing outside the venv is ever written. Settings (environment variables):
#   MXFP8_VENV=DIR                  use DIR instead of <checkout>/.venv (made there when missing)
#   MXFP8_VENV_SYSTEM_SITE=0        a venv that sees only its own packages (takes effect when it is made:
#                                   delete .venv first)
#   MXFP8_PYTHON=python3.12         the interpreter the venv is made from (default python3, >= 3.9)
# When the python3 on the PATH already runs inside a virtual environment (one you activated), the scripts
# use that one as it is and make none.
#
# Sourcing also defines what the scripts share:
#   stage TEXT                      a line "==> [m:ss] TEXT" (time since the script started), after a
#                                   line saying how long the previous stage took; stage_done ends the last
#   run_logged NAME FILTER CMD...   runs CMD with its output in a log file; shows only the lines matching the
#                                   extended regex FILTER as they come (empty: none); when CMD fails, shows the
#                                   log's last 60 lines and its path and exits with CMD's status
#   pip_install ARG...              python3 -m pip install ARG... into the venv, through run_logged
mxfp8_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The clock: from MXFP8_SCRIPT_START, which a script exports for the scripts it calls (demo.sh, test.sh),
# else from now.
mxfp8_clock=${MXFP8_SCRIPT_START:-$(date +%s)}
mxfp8_stage_name=
mxfp8_stage_start=
stage_done() {  # "(took N s)" for the stage under way, if any
  [ -z "$mxfp8_stage_name" ] || printf '    (took %d s)\n' $((SECONDS - mxfp8_stage_start))
  mxfp8_stage_name=
}
stage() {
  local now=$(($(date +%s) - mxfp8_clock))
  stage_done
  mxfp8_stage_name=$1
  mxfp8_stage_start=$SECONDS
  printf '==> [%d:%02d] %s\n' $((now / 60)) $((now % 60)) "$*"
}

run_logged() {
  local - name=$1 filter=$2 rc=0 log
  set -o pipefail
  shift 2
  mkdir -p "$mxfp8_root/build/logs"
  log="$mxfp8_root/build/logs/$name.log"
  if [ -n "$filter" ]; then
    # awk prints the matching lines as they come and always exits 0, so the status is the command's.
    "$@" 2>&1 </dev/null | tee "$log" | awk -v re="$filter" '$0 ~ re { sub(/^ +/, ""); print "    " $0; fflush() }' ||
      rc=${PIPESTATUS[0]}
  else
    "$@" >"$log" 2>&1 </dev/null || rc=$?
  fi
  if [ "$rc" -ne 0 ]; then
    echo "---- last lines of $log:" >&2
    tail -n 60 "$log" >&2
    echo "FAILED (exit $rc): $* -- the whole output is in $log" >&2
    exit "$rc"
  fi
}

pip_install() {
  run_logged pip-install "" python3 -m pip install --disable-pip-version-check "$@"
}

mxfp8_make_venv() {
  local venv=$1 python=${MXFP8_PYTHON:-python3} site=(--system-site-packages)
  [ "${MXFP8_VENV_SYSTEM_SITE:-1}" != 0 ] || site=()
  command -v "$python" >/dev/null || { echo "venv.sh: $python not found (Debian: apt-get install python3 python3-venv)" >&2; return 1; }
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
    { echo "venv.sh: $("$python" --version 2>&1) is older than 3.9, which mxfp8 needs (MXFP8_PYTHON=python3.X picks another)" >&2; return 1; }
  local seeing=", seeing the packages installed system-wide"
  [ ${#site[@]} -gt 0 ] || seeing=
  stage "making the virtual environment $venv (from $("$python" --version 2>&1)$seeing)"
  if ! "$python" -m venv "${site[@]}" "$venv"; then
    rm -rf "$venv"
    echo "venv.sh: '$python -m venv' failed (Debian and Ubuntu: apt-get install python3-venv;" \
      "scripts/install_deps.sh does it)" >&2
    return 1
  fi
}

mxfp8_activate() {
  local venv
  if [ -n "${MXFP8_VENV:-}" ]; then
    venv=$MXFP8_VENV
  elif python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null; then
    venv=$(python3 -c 'import sys; print(sys.prefix)')  # already inside one: use it
  else
    venv=$mxfp8_root/.venv
  fi
  # A venv whose interpreter is gone (the Python it was made from was removed or upgraded) is made again.
  if [ -e "$venv" ] && ! "$venv/bin/python" -c '' 2>/dev/null; then
    echo "venv.sh: $venv does not run any more (its Python changed): making it again" >&2
    rm -rf "$venv"
  fi
  [ -x "$venv/bin/python" ] || mxfp8_make_venv "$venv" || return 1
  venv=$(cd "$venv" && pwd)
  export VIRTUAL_ENV=$venv
  case ":$PATH:" in *":$venv/bin:"*) ;; *) export PATH="$venv/bin:$PATH" ;; esac
  unset PYTHONHOME
  # pip refuses to install anywhere but a virtual environment, whatever a script or a user asks for.
  export PIP_REQUIRE_VIRTUALENV=1 PIP_DISABLE_PIP_VERSION_CHECK=1
  hash -r
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced
  set -euo pipefail
  mxfp8_activate
  echo "$VIRTUAL_ENV ($(python3 --version)); use it with: . $VIRTUAL_ENV/bin/activate"
elif [ "${mxfp8_helpers_only:-0}" != 1 ]; then  # (install_deps.sh installs python3-venv first)
  mxfp8_activate || { echo "venv.sh: no virtual environment, stopping" >&2; return 1 2>/dev/null || exit 1; }
fi
