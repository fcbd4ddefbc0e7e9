# SPDX-License-Identifier: Apache-2.0
# The time-limited steps run.sh and cold.sh share. Source it after setting `deadline` (the
# run's end, epoch seconds), `reserve` (seconds kept for the report) and `out` (logs go to
# OUT/logs); `stop_signal` (default TERM) is what a step gets at its limit, then KILL.

# limit CAP: seconds a step may take, at most CAP and what is left; 0 when nothing is
limit() {
    local left=$((deadline - reserve - $(date +%s)))
    if [ "$left" -lt 5 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else
        echo "$1"; fi
}

# why LOG: the line of a log that says what went wrong
why() {
    grep -E -m 1 '^(stoker-|[a-z_]+(\.sh)?:)|[A-Za-z]*Error|error:' "$1" 2>/dev/null ||
        tail -n 1 "$1"
}

# step NAME CAP CMD...: runs CMD with a time limit, stdout and stderr to OUT/logs/NAME.*;
# returns CMD's status, 124 when it ran out of time, 125 when no time was left.
stop_signal=${stop_signal:-TERM}
step() {
    local name=$1 cap=$2 t rc=0 t0
    shift 2
    t=$(limit "$cap")
    if [ "$t" = 0 ]; then
        echo "  $name: skipped, time budget spent"
        return 125
    fi
    t0=$(date +%s)
    timeout -s "$stop_signal" -k 5 "$t" "$@" > "$out/logs/$name.out" \
        2> "$out/logs/$name.err" || rc=$?
    case "$rc" in
        0) echo "  $name: $(($(date +%s) - t0)) s" ;;
        124|137) echo "  $name: stopped after $t s (time limit)"; rc=124 ;;
        *) echo "  $name: failed ($rc): $(why "$out/logs/$name.err")" ;;
    esac
    return "$rc"
}

# probe_py MODULES: the first of python3, /usr/bin/python3 that imports MODULES
probe_py() {
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" > /dev/null 2>&1 || continue
        if timeout 60 "$py" -c "import $1" > /dev/null 2>&1; then echo "$py"; return 0; fi
    done
    return 1
}
