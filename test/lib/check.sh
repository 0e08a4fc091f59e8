# The end-to-end scripts' assertions: each prints "ok - NAME" or "not ok - NAME ..." and
# a failure sets FAIL=1; a script ends with `exit $FAIL`.
FAIL=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: expected [$2] got [$3]"; FAIL=1; fi
}
check_true() {  # check_true NAME VALUE: VALUE must be "t"
    if [ "$2" = "t" ]; then echo "ok - $1"; else echo "not ok - $1 (got [$2])"; FAIL=1; fi
}
wait_until() {  # wait_until SECONDS COMMAND...: until COMMAND prints "t", at most SECONDS; prints it
    local deadline=$(( $(date +%s%3N) + $1 * 1000 )) v=""; shift
    while :; do
        v=$("$@" 2>/dev/null || true)
        [ "$v" = t ] && break
        [ "$(date +%s%3N)" -ge "$deadline" ] && break
        sleep 0.1
    done
    echo "${v:-f}"
}
