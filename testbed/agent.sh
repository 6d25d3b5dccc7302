#!/bin/sh
# The testbed's command server (busybox sh), on the virtio-serial port given as $1.
# Protocol, one request then one answer:
#   host: RUN id n <n bytes of shell script>   -> guest: RESULT id m <m bytes: tar of stdout,
#         stderr, status and out/ (the script's $OUT)>
#   host: PUT id n <n bytes of tar>            -> guest: OK id tar-status (unpacked at /)
#   host: QUIT id 0                            -> the VM powers off
# The port is not a tty, so bytes pass unchanged (no line discipline, no base64).
exec 3<>"$1"
# exactly $1 bytes of the port to stdout: dd with fullblock never reads past them
take() { dd bs=65536 count="$1" iflag=count_bytes,fullblock 2>/dev/null <&3; }
echo "READY $(cut -d' ' -f1 /proc/uptime)" >&3
R=/run/testbed
while read -r verb id n <&3; do
    case "$verb" in
    RUN)
        rm -rf "$R"
        mkdir -p "$R/out"
        take "$n" > "$R/cmd.sh"
        (cd /root && OUT="$R/out" exec sh "$R/cmd.sh" < /dev/null > "$R/stdout" 2> "$R/stderr" 3>&-)
        echo $? > "$R/status"
        (cd "$R" && tar cf "$R.tar" stdout stderr status out)
        echo "RESULT $id $(stat -c %s "$R.tar")" >&3
        cat "$R.tar" >&3
        rm -f "$R.tar"
        ;;
    PUT)
        take "$n" | tar xf - -C /
        echo "OK $id $?" >&3
        ;;
    QUIT)
        break
        ;;
    *)
        echo "ERROR $id unknown request $verb" >&3
        ;;
    esac
done
