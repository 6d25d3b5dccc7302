#!/bin/sh
# PID 1 of the testbed VM (testbed/build.py puts it at /init of the initramfs; busybox sh).
# Mounts what the tests read, loads the modules the image carries, then serves the host's
# commands on the virtio-serial port "tierkit.0" (python/tierkit/testbed.py is the other end).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run /root
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
hostname tierkit-vm
# modules that the kernel package builds as modules but the tests need, in dependency order
if [ -f /etc/testbed-modules ]; then
    while read -r ko; do insmod "$ko" || echo "testbed: insmod $ko failed"; done < /etc/testbed-modules
fi
# the control port: its /dev node is named by index, so find it by name
port=
i=0
while [ -z "$port" ] && [ $i -lt 200 ]; do
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = tierkit.0 ] && port=/dev/${p##*/}
    done
    [ -n "$port" ] && [ -e "$port" ] && break
    port=
    i=$((i + 1))
    usleep 50000
done
if [ -z "$port" ]; then
    echo "testbed: no virtio-serial port named tierkit.0; shutting down"
    poweroff -f
fi
/bin/sh /etc/testbed-agent.sh "$port"
poweroff -f
