#!/bin/busybox sh
# /init of rtlab's QEMU guests: mounts what the agent reads, then runs commands that
# the host sends over the serial console, one a line:
#
#   @rtlab-cmd ID COMMAND...    runs `sh -c COMMAND` in the background, then prints
#                               @rtlab-exit ID STATUS
#
# or, with rtlab.console=shell on the kernel's command line, gives the console a shell.
#
# Commands run in the background so that a `stop` can reach a running measurement.
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /tmp /run
/bin/busybox --install -s
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp

# The kernel's boot is over: the host stops timing its silence (a riscv64 boot speaks every
# few tenths of a second until here; what follows, a user's boot.d steps too, may be quiet).
echo "@rtlab-init"
mount -t proc proc /proc
# From here only the kernel's alerts (a panic, a lockup) reach the console, which carries the
# agent's lines, however much it said while it booted (riscv64's says all: machines.py). A
# farm's shell keeps every message, as a farm's console does. (dmesg -n needs no /proc/sys.)
case " $(cat /proc/cmdline) " in
*" rtlab.console=shell "*) ;;
*) dmesg -n 3 2>/dev/null || echo 3 >/proc/sys/kernel/printk ;;
esac
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
# Optional: what tracing and tuning use, where the kernel has it.
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
hostname rtlab-guest
# Loopback: the irq load's network traffic and any user load that talks to itself.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null
if [ -f /boot/config ]; then ln -sf config "/boot/config-$(uname -r)"; fi
ln -sf /proc/self/fd /dev/fd 2>/dev/null
# A user's initrd may bring start-up steps of its own (a driver to load, a service to start),
# run in name order before the host gets the console.
for step in /etc/rtlab/boot.d/*; do
	if [ -x "$step" ]; then "$step" </dev/null >/dev/console 2>&1 || echo "rtlab: $step failed ($?)" >/dev/console; fi
done

exec </dev/console >/dev/console 2>&1
# A farm's own test shell drives the guest (LAVA's qemu device type, `rtlab lava job --qemu`):
# a shell on the console, with the prompt its job waits for, in place of the command loop.
case " $(cat /proc/cmdline) " in
*" rtlab.console=shell "*)
	export PS1='rtlab-guest# '
	if command -v cttyhack >/dev/null 2>&1; then exec setsid cttyhack sh -i; fi
	exec sh -i
	;;
esac
# The host reads what it typed from no one but the agent.
stty -echo 2>/dev/null
echo "@rtlab-ready $(uname -r)"

while IFS= read -r line; do
	case $line in
	"@rtlab-cmd "*) ;;
	*) continue ;;
	esac
	rest=${line#@rtlab-cmd }
	id=${rest%% *}
	cmd=${rest#* }
	(
		sh -c "$cmd" </dev/null
		echo "@rtlab-exit $id $?"
	) &
done
