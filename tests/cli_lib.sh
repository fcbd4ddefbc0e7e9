# SPDX-License-Identifier: Apache-2.0
# Helpers the command-line tests share; source it after setting T, the test's temporary
# folder. Not a test itself (ctest runs tests/test_*.sh only).

fail() { echo "FAIL: $*" >&2; exit 1; }

# run WANT_RC CMD...: runs CMD, stdout in $T/stdout, stderr in $T/stderr, checks the code.
run() {
    local want=$1
    shift
    "$@" >"$T/stdout" 2>"$T/stderr"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        cat "$T/stdout" "$T/stderr" >&2
        fail "'$*' exited $rc, want $want"
    fi
}

# has FILE TEXT: $T/FILE contains TEXT.
has() { grep -q -- "$2" "$T/$1" || { cat "$T/$1" >&2; fail "$1 lacks '$2'"; }; }
