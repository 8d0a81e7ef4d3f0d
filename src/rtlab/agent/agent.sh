#!/bin/sh
# rtlab agent: the only code that runs on the measured system.
#
# It must work under busybox ash and dash (boards have no Python, no bash), so it
# uses POSIX sh and the commands busybox provides. The host prepares a run folder
# (the plan as plain files) and reads back what the agent writes there.
#
#   agent.sh sysinfo              prints system information as JSON
#   agent.sh preflight PRIO RUNS|- [PROGRAM...]
#                                 checks cyclictest and the loads' programs, SCHED_FIFO+mlock,
#                                 another active run (the lock) and, in RUNS, the free space
#   agent.sh run DIR [--seconds S] [--settle S] [--governor NAME|keep] [--cgroup PATH]
#                    [--grace S] [--segment S] [--idle-after-boot S] [--stream-results]
#                    [--trace-seconds S --trace-us US [--trace-spikes N] [--trace-level auto|a|b|c]]
#   agent.sh stop DIR             ends a run (its pid is in DIR/agent.pid) and anything it left
#   agent.sh hwlat DIR SECONDS THRESHOLD_US [CPUMASK]
#                                 the hwlat tracer alone (never during a measurement: it holds
#                                 the lock) on the CPUs of CPUMASK (hex); prints its trace between
#                                 "@rtlab hwlat-trace" and "@rtlab hwlat-end", tracefs restored
#   agent.sh stressors [CLASS...] stress-ng's stressors (all, then each CLASS's) for rtlab scan
#   agent.sh file OP PATH [ARG]   reads and writes /proc, /sys and rtlab's state for tuning:
#                                 read, write VALUE, glob, exists, append64 BASE64, rename TO,
#                                 remove, mkdir, rmdir (every PATH under RTLAB_ROOT)
#
# One run measures at a time on a system: `run` holds the lock $RTLAB_TARGET_DIR/lock (a
# folder made with mkdir, atomic everywhere; its `owner` file says "PID START DIR"). A lock
# whose owner is gone, or whose PID now belongs to a process started at another time, is stale.
#
# Layout of DIR read by `run`:
#   DIR/plan.loads                  load names, one per line, in order
#   DIR/plan.probes                 with --probe: the other probes' names, one per line, in order
#   DIR/loads/L/cyclictest.argv     cyclictest arguments, one per line
#   DIR/loads/L/load.argv           the load's command (stress-ng or any), one argument a line
#                                   (absent: idle)
#   DIR/loads/L/load.check          how the load is checked: alive, or oom-kill (the kernel's OOM
#                                   killer must kill during the load: oom_kill in /proc/vmstat)
# and written by `run`:
#   DIR/events                      the @rtlab lines below, one per line
#   DIR/loads/L/cyclictest.json     cyclictest's own JSON, renamed into place only when
#                                   cyclictest exited 0 (otherwise left as cyclictest.json.part)
#   DIR/loads/L/cyclictest.out      cyclictest's standard output as it printed it: the
#                                   oscilloscope lines (-v -o) and the spike list (--spike)
#   DIR/loads/L/cyclictest.log      cyclictest's standard error, then its exit status
#   DIR/loads/L/segments/NNN/...    with --segment: cyclictest's three files for each segment
#   DIR/loads/L/P/probe.*           with --probe: probe P's argv (read), .out, .log and .json
#   DIR/loads/L/load.log            the load's output, then its exit status
#   DIR/loads/L/*.pid               the process groups of cyclictest and the load
#   DIR/governors.saved             "value path" lines; present while governors are changed
#
# Progress lines (stdout and DIR/events):
#   @rtlab clock t=UPTIME wall=EPOCH_SECONDS          (once, first: ties uptime to the wall clock)
#   @rtlab boot-idle t=UPTIME up=S until=S              (--idle-after-boot: waiting)
#   @rtlab governor t=UPTIME status=set|unavailable|kept|failed
#   @rtlab load-start t=UPTIME load=L seconds=S         (then the load settles)
#   @rtlab measure-start t=UPTIME load=L                (cyclictest starts)
#   @rtlab segment-start t=UPTIME load=L n=N seconds=S  (--segment: each cyclictest run of a load)
#   @rtlab segment-end t=UPTIME load=L n=N status=complete|failed
#   @rtlab measure-end t=UPTIME load=L                  (cyclictest ended; the load is stopped next)
#   @rtlab probe-start t=UPTIME load=L probe=P seconds=S (--probe: the next probe, same load)
#   @rtlab probe-end t=UPTIME load=L probe=P status=complete|partial|failed [reason=TEXT]
#   @rtlab trace-start t=UPTIME load=L level=a|b|c seconds=S threshold_us=US clock=C asked=LEVEL
#   @rtlab trace-spike t=UPTIME load=L n=N cpu=C [hit=UPTIME]  (levels a, b: a capture)
#   @rtlab trace-end t=UPTIME load=L spikes=N [reason=TEXT]
#   @rtlab load-end t=UPTIME load=L status=complete|partial|failed [reason=TEXT]
#   @rtlab done t=UPTIME status=complete|partial|failed [reason=TEXT]
# and on stdout only, with --stream-results (targets that cannot copy files back later):
#   @rtlab result load=L, base64 lines of loads/L as a gzipped tar, @rtlab result-end load=L
#
# A measurement never outlives its plan: cyclictest that has not ended GRACE seconds
# (default 30) after its planned end, or that ignores SIGTERM for STOP_GRACE seconds, is
# killed with its process group; so is a load that ignores SIGTERM. A load whose
# process ends before cyclictest does is stopped at once and failed: it measured no load.
# The agent and cyclictest are never the OOM killer's victims (oom_score_adj -1000); the
# load's processes are (0, and stress-ng makes its own workers the first to go).

set -u
# A host that went away must not take the measurement with it.
trap '' PIPE

# Every /proc and /sys path goes through ROOT so tests can use a fake tree.
ROOT=${RTLAB_ROOT:-}
EVENTS=
STOP=0
GOT_SIGNAL=0
CT_PID=
SLEEP_PID=
STRESS_PID=
LOAD_DIR=
GOVSAVE=
LOCK=
GRACE=30
STOP_GRACE=10
STREAM=0
SEGMENT=0
TRACE_SECS=0
TRACE_US=0
TRACE_SPIKES=20
TRACE_LEVEL=auto
TRACESAVE=
BASE_DIR=${RTLAB_TARGET_DIR:-/tmp/rtlab}

# Every event carries t=, seconds since boot (/proc/uptime, which busybox boards have too):
# the clock the host places phases and cyclictest's spikes on (CLOCK_MONOTONIC, the same
# clock unless the system was suspended while measuring).
emit() {
	kind=$1
	shift
	read -r up _ </proc/uptime 2>/dev/null || up=
	printf '@rtlab %s t=%s %s\n' "$kind" "$up" "$*"
	if [ -n "$EVENTS" ]; then printf '@rtlab %s t=%s %s\n' "$kind" "$up" "$*" >>"$EVENTS"; fi
}

die() {
	printf 'rtlab agent: %s\n' "$*" >&2
	exit 2
}

# --- JSON output -----------------------------------------------------------

json_str() {
	printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' |
		tr '\t\r\n' '   ' | tr -d '\000-\037')"
}

MISSING=
# A file under ROOT as a JSON string, or null: a missing file is recorded, not fatal.
# (No command substitution around the test: MISSING must change in this shell.)
json_file() {
	if [ -r "$ROOT$1" ]; then
		json_str "$(cat "$ROOT$1" 2>/dev/null)"
	else
		MISSING="$MISSING $1"
		printf null
	fi
}

first_line() { sed -n 1p; }

tool_version() {
	case $1 in
	cyclictest) cyclictest --help 2>&1 | first_line | sed -n 's/.* V *\([0-9][0-9.]*\).*/\1/p' ;;
	stress-ng) stress-ng --version 2>&1 | first_line | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p' ;;
	esac
}

# The kernel options that decide or disturb latency: preemption model, tick, governor
# default, tracers and the debug options that add latency (rtlab.system.kernel's
# LATENCY_DEBUG_OPTIONS among them: a test checks that each one matches).
CONFIG_RE='^(# )?CONFIG_(PREEMPT[A-Z_]*|HZ[A-Z_0-9]*|NO_HZ[A-Z_]*|CPU_FREQ[A-Z_]*|CPU_IDLE|CPUSETS|'\
'RCU_NOCB_CPU|RCU_BOOST|IRQ_FORCED_THREADING|HIGH_RES_TIMERS|SCHED_TRACER|TIMERLAT_TRACER|'\
'HWLAT_TRACER|OSNOISE_TRACER|FTRACE|FUNCTION_TRACER|DEBUG_PREEMPT|PROVE_LOCKING|LOCKDEP|'\
'DEBUG_LOCK_ALLOC|DEBUG_SPINLOCK|DEBUG_MUTEXES|DEBUG_RT_MUTEXES|DEBUG_ATOMIC_SLEEP|KASAN|KCSAN|'\
'UBSAN|DEBUG_OBJECTS|DEBUG_PAGEALLOC|SLUB_DEBUG_ON|DEBUG_KMEMLEAK|LATENCYTOP|'\
'PREEMPT_TRACER|IRQSOFF_TRACER|TRACE_IRQFLAGS|KCOV)[= ]'

config_text() {
	release=$(uname -r)
	if [ -r "$ROOT/proc/config.gz" ]; then
		CONFIG_SOURCE=/proc/config.gz
		gzip -dc "$ROOT/proc/config.gz" 2>/dev/null
	elif [ -r "$ROOT/boot/config-$release" ]; then
		CONFIG_SOURCE=/boot/config-$release
		cat "$ROOT/boot/config-$release"
	else
		MISSING="$MISSING /proc/config.gz /boot/config-$release"
	fi
}

config_json() {
	CONFIG_SOURCE=
	tmp=$(mktemp "${TMPDIR:-/tmp}/rtlab-config.XXXXXX") || tmp=/dev/null
	config_text >"$tmp"
	printf '{"source": '
	if [ -n "$CONFIG_SOURCE" ]; then json_str "$CONFIG_SOURCE"; else printf null; fi
	printf ', "options": {'
	sep=
	grep -E "$CONFIG_RE" "$tmp" | sed -e 's/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1=n/' |
		while IFS='=' read -r key value; do
			printf '%s' "$sep"
			json_str "$key"
			printf ': '
			json_str "$(printf '%s' "$value" | sed -e 's/^"//' -e 's/"$//')"
			sep=', '
		done
	printf '}}'
	[ "$tmp" = /dev/null ] || rm -f "$tmp"
}

cpu_model() {
	sed -n -e 's/^model name[[:space:]]*: *//p' -e 's/^uarch[[:space:]]*: *//p' \
		-e 's/^Hardware[[:space:]]*: *//p' -e 's/^cpu model[[:space:]]*: *//p' \
		"$ROOT/proc/cpuinfo" 2>/dev/null | first_line
}

cpus_json() {
	printf '{"online": '
	json_file /sys/devices/system/cpu/online
	n=$(grep -c '^processor' "$ROOT/proc/cpuinfo" 2>/dev/null)
	[ "${n:-0}" -gt 0 ] 2>/dev/null || n=$(nproc 2>/dev/null)
	printf ', "count": %s, "model": ' "${n:-0}"
	json_str "$(cpu_model)"
	printf ', "governors": {'
	sep=
	for d in "$ROOT"/sys/devices/system/cpu/cpu[0-9]*; do
		[ -d "$d" ] || continue
		f=$d/cpufreq/scaling_governor
		[ -r "$f" ] || continue
		printf '%s"%s": ' "$sep" "${d##*/cpu}"
		json_str "$(cat "$f")"
		sep=', '
	done
	printf '}'
	[ -n "$sep" ] || MISSING="$MISSING /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
	printf ', "cores": '
	cores_json
	printf '}'
}

# What tells a heterogeneous SoC's clusters apart, per CPU, where the target says it: the
# scheduler's capacity, the CPUs sharing its clock (cpufreq policy) and the core type from
# /proc/cpuinfo (ARM "CPU implementer:part", RISC-V "uarch"); x86 hybrids list their P and
# E cores in /sys/devices/cpu_core and cpu_atom.
cores_json() {
	types=$(awk -F': *' '
		/^processor[[:space:]]*:/ { p = $2; impl = "" }
		/^CPU implementer[[:space:]]*:/ { impl = $2 }
		/^(CPU part|uarch)[[:space:]]*:/ {
			if (p != "" && !(p in seen)) { seen[p] = 1; print p, (impl != "" ? impl ":" $2 : $2) }
		}' "$ROOT/proc/cpuinfo" 2>/dev/null)
	printf '{'
	sep=
	capacities=0
	for d in "$ROOT"/sys/devices/system/cpu/cpu[0-9]*; do
		[ -d "$d" ] || continue
		n=${d##*/cpu}
		printf '%s"%s": {' "$sep" "$n"
		inner=
		if [ -r "$d/cpu_capacity" ]; then
			printf '"capacity": %s' "$(json_str "$(cat "$d/cpu_capacity")")"
			inner=', '
			capacities=$((capacities + 1))
		fi
		if [ -r "$d/cpufreq/related_cpus" ]; then
			printf '%s"clock_domain": %s' "$inner" "$(json_str "$(cat "$d/cpufreq/related_cpus")")"
			inner=', '
		fi
		type=$(printf '%s\n' "$types" | sed -n "s/^$n //p" | first_line)
		if [ -n "$type" ]; then printf '%s"type": %s' "$inner" "$(json_str "$type")"; fi
		printf '}'
		sep=', '
	done
	printf '}'
	[ $capacities -gt 0 ] || MISSING="$MISSING /sys/devices/system/cpu/cpu*/cpu_capacity"
	for kind in core atom; do
		if [ -r "$ROOT/sys/devices/cpu_$kind/cpus" ]; then
			printf ', "hybrid_%s": %s' "$kind" "$(json_str "$(cat "$ROOT/sys/devices/cpu_$kind/cpus")")"
		fi
	done
}

# Runtime state that decides latency; `rtlab check` audits it. The same list as
# rtlab.system.knobs.RUNTIME_FILES (a test compares them).
RUNTIME_FILES='/proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/timer_migration
/sys/kernel/mm/ksm/run /sys/kernel/mm/transparent_hugepage/enabled /proc/sys/kernel/sched_rt_period_us
/proc/irq/default_smp_affinity /sys/devices/system/cpu/isolated /sys/devices/system/cpu/nohz_full
/sys/devices/virtual/workqueue/cpumask /sys/fs/cgroup/cgroup.controllers'

runtime_json() {
	printf '{"files": {'
	sep=
	for f in $RUNTIME_FILES; do
		printf '%s' "$sep"
		json_str "$f"
		printf ': '
		json_file "$f"
		sep=', '
	done
	printf '}, "irqbalance": '
	if pidof irqbalance >/dev/null 2>&1; then printf true; else printf false; fi
	printf ', "cpuidle_states": {'
	sep=
	for d in "$ROOT"/sys/devices/system/cpu/cpu0/cpuidle/state[0-9]*; do
		[ -r "$d/name" ] || continue
		printf '%s"%s": ' "$sep" "${d##*/state}"
		json_str "$(cat "$d/name")"
		sep=', '
	done
	printf '}}'
}

# What spike causes can use: tracefs (mounted, or only in the kernel), its tracers and clocks,
# and rtla with auto-analysis (--aa-only, rtla 6.3 and later).
tracing_json() {
	t=$(tracefs_dir) || t=
	printf '{"tracefs": '
	if [ -n "$t" ]; then json_str "${t#"$ROOT"}"; else printf null; fi
	printf ', "in_kernel": '
	if grep -q tracefs "$ROOT/proc/filesystems" 2>/dev/null; then printf true; else printf false; fi
	printf ', "tracers": '
	if [ -n "$t" ]; then json_str "$(cat "$t/available_tracers" 2>/dev/null)"; else printf null; fi
	printf ', "clocks": '
	if [ -n "$t" ]; then json_str "$(cat "$t/trace_clock" 2>/dev/null)"; else printf null; fi
	printf ', "rtla": '
	if command -v rtla >/dev/null 2>&1; then json_str "$(command -v rtla)"; else printf null; fi
	printf ', "rtla_auto_analysis": '
	if rtla timerlat top --help 2>&1 | grep -q -- '--aa-only'; then printf true; else printf false; fi
	printf '}'
}

# The device tree's root `compatible` (NUL-separated strings) as a JSON list; null without
# a device tree (x86, ACPI): a board's identity for farms (KCIDB's environment.compatible).
board_compatible() {
	f=/proc/device-tree/compatible
	if [ ! -r "$ROOT$f" ]; then
		MISSING="$MISSING $f"
		printf null
		return 0
	fi
	printf '['
	sep=
	for c in $(tr '\000' ' ' <"$ROOT$f" 2>/dev/null); do
		printf '%s' "$sep"
		json_str "$c"
		sep=', '
	done
	printf ']'
}

cmd_sysinfo() {
	printf '{"schema": "rtlab.sysinfo/1", "collected": '
	json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf ', "hostname": '
	json_str "$(cat "$ROOT/proc/sys/kernel/hostname" 2>/dev/null || hostname)"
	printf ', "kernel": {"release": '
	json_str "$(uname -r)"
	printf ', "machine": '
	json_str "$(uname -m)"
	printf ', "version": '
	json_file /proc/version
	printf ', "realtime": '
	json_file /sys/kernel/realtime
	printf ', "cmdline": '
	json_file /proc/cmdline
	printf ', "preempt_mode": '
	json_file /sys/kernel/debug/sched/preempt
	printf '}, "board": {"model": '
	json_file /proc/device-tree/model
	printf ', "compatible": '
	board_compatible
	printf '}, "config": '
	config_json
	printf ', "cpus": '
	cpus_json
	printf ', "tools": {"cyclictest": '
	json_str "$(tool_version cyclictest)"
	printf ', "stress-ng": '
	json_str "$(tool_version stress-ng)"
	printf '}, "tracing": '
	tracing_json
	printf ', "runtime": '
	runtime_json
	printf ', "missing": ['
	sep=
	set -f # the missing paths hold patterns (cpu*): list them, do not expand them
	for m in $MISSING; do
		printf '%s' "$sep"
		json_str "$m"
		sep=', '
	done
	set +f
	printf ']}\n'
}

# --- processes and the lock ---------------------------------------------------

# Field 22 of /proc/PID/stat (its start time in clock ticks): a PID and its start time name
# one process for good, even after the PID is reused.
proc_start() {
	sed -n 's/.*) //p' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# A process that exists and is not a zombie (an ended child nobody has waited for yet).
alive() {
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1
	state=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ "$state" != Z ]
}

# The live owner of the lock as "PID DIR", or nothing when the lock is free or stale.
lock_holder() {
	lock=$BASE_DIR/lock
	[ -d "$lock" ] || return 0
	if [ ! -f "$lock/owner" ]; then
		# Taken a moment ago and its owner not yet written, unless that was long ago.
		age=$(($(date +%s) - $(stat -c %Y "$lock" 2>/dev/null || echo 0)))
		if [ "$age" -lt 60 ]; then printf '%s %s\n' "?" "?"; fi
		return 0
	fi
	read -r pid start dir <"$lock/owner" || return 0
	if alive "$pid" && [ "$(proc_start "$pid")" = "$start" ]; then printf '%s %s\n' "$pid" "$dir"; fi
}

# Takes the lock for this run, or prints who holds it; a stale lock is moved away first.
lock_take() {
	mkdir -p "$BASE_DIR" 2>/dev/null
	lock=$BASE_DIR/lock
	tries=0
	waits=0
	while ! mkdir "$lock" 2>/dev/null; do
		holder=$(lock_holder)
		if [ "$holder" = "? ?" ] && [ $waits -lt 5 ]; then
			# taken a moment ago by a run started at the same instant: its owner is being written
			waits=$((waits + 1))
			sleep 1
			continue
		fi
		if [ -n "$holder" ] || [ $tries -ge 3 ]; then
			# shellcheck disable=SC2086 # "PID DIR" split into its two words on purpose
			set -- $holder
			emit busy pid="${1:-?}" run="${2##*/}"
			return 1
		fi
		mv "$lock" "$lock.stale.$$" 2>/dev/null && rm -rf "$lock.stale.$$"
		tries=$((tries + 1))
	done
	printf '%s %s %s\n' "$$" "$(proc_start $$)" "$DIR" >"$lock/owner.part" &&
		mv "$lock/owner.part" "$lock/owner"
	LOCK=$lock
}

lock_release() {
	[ -n "$LOCK" ] || return 0
	rm -rf "$LOCK"
	LOCK=
}

# --- preflight -------------------------------------------------------------

# The commands the agent and rtlab's targets run on a board besides the shell's built-ins:
# all of them busybox applets (the README's "Boards over SSH" lists them with their options).
AGENT_NEEDS="awk base64 cat cp cut date df env grep gzip kill mkdir mktemp mv rm sed sleep stat tail tar tr uname wc"

cmd_preflight() {
	prio=${1:-99}
	runs=${2:--}
	[ "$runs" != - ] || runs=
	shift 2 2>/dev/null || shift $#
	ok=0
	for program in $AGENT_NEEDS; do
		if ! command -v "$program" >/dev/null 2>&1; then
			printf '@rtlab missing name=%s need=agent\n' "$program"
			ok=1
		fi
	done
	[ $ok = 0 ] || return 1
	holder=$(lock_holder)
	if [ -n "$holder" ]; then
		# shellcheck disable=SC2086 # "PID DIR" split into its two words on purpose
		set -- $holder
		printf '@rtlab busy run=%s pid=%s\n' "${2##*/}" "$1"
		return 1
	fi
	if [ -n "$runs" ]; then
		mkdir -p "$runs" 2>/dev/null
		printf '@rtlab space kb=%s\n' "$(df -k "$runs" 2>/dev/null | awk 'NR == 2 { print $4 }')"
	fi
	if command -v cyclictest >/dev/null 2>&1; then
		printf '@rtlab tool name=cyclictest version=%s\n' "$(tool_version cyclictest)"
	else
		printf '@rtlab missing name=cyclictest\n'
		ok=1
	fi
	for program in "$@"; do
		if command -v "$program" >/dev/null 2>&1; then
			printf '@rtlab tool name=%s version=%s\n' "$program" "$(tool_version "$program")"
		else
			printf '@rtlab missing name=%s\n' "$program"
			ok=1
		fi
		# rtla measures with the kernel's timerlat tracer (--probe timerlat)
		if [ "$program" = rtla ] && ! grep -qw timerlat "$(tracefs_dir)/available_tracers" 2>/dev/null; then
			printf '@rtlab missing name=timerlat-tracer\n'
			ok=1
		fi
	done
	[ $ok = 0 ] || return 1
	# Two loops are enough to learn whether SCHED_FIFO and mlockall are allowed.
	if out=$(cyclictest -m -p "$prio" -i 1000 -l 2 -q 2>&1); then
		printf '@rtlab privileges status=ok\n'
	else
		printf '@rtlab privileges status=denied reason=%s\n' "$(printf '%s' "$out" | tr '\n' ' ')"
		return 1
	fi
}

# --- governors -------------------------------------------------------------

governors_set() {
	want=$1
	if [ "$want" = keep ]; then
		emit governor status=kept
		return 0
	fi
	: >"$GOVSAVE.part"
	for f in "$ROOT"/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
		[ -f "$f" ] || continue
		printf '%s %s\n' "$(cat "$f")" "$f" >>"$GOVSAVE.part"
	done
	if [ ! -s "$GOVSAVE.part" ]; then
		rm -f "$GOVSAVE.part"
		emit governor status=unavailable
		return 0
	fi
	# Saved before anything changes, so a crash can always be undone.
	mv "$GOVSAVE.part" "$GOVSAVE"
	status='set'
	while read -r _old path; do
		printf '%s\n' "$want" >"$path" 2>/dev/null || status=failed
	done <"$GOVSAVE"
	emit governor status=$status
}

governors_restore() {
	[ -n "$GOVSAVE" ] && [ -f "$GOVSAVE" ] || return 0
	while read -r old path; do
		printf '%s\n' "$old" >"$path" 2>/dev/null
	done <"$GOVSAVE"
	rm -f "$GOVSAVE"
}

# --- measuring -------------------------------------------------------------

on_signal() {
	GOT_SIGNAL=1
	[ $STOP = 1 ] && return
	STOP=1
	if [ -n "$SLEEP_PID" ]; then kill "$SLEEP_PID" 2>/dev/null; fi
	# cyclictest writes its JSON on SIGTERM, so what was measured is kept.
	if [ -n "$CT_PID" ]; then kill -TERM "$CT_PID" 2>/dev/null; fi
}

# wait for $1 even when a signal interrupts `wait`; the status lands in WAIT_RC.
wait_pid() {
	while :; do
		GOT_SIGNAL=0
		wait "$1"
		WAIT_RC=$?
		[ $GOT_SIGNAL = 1 ] || return 0
	done
}

# Sleeps $1 seconds (fractions where sleep takes them); a signal cuts it short.
nap() {
	sleep "$1" &
	SLEEP_PID=$!
	wait_pid "$SLEEP_PID"
	SLEEP_PID=
}

pause() {
	[ "$1" -gt 0 ] 2>/dev/null || return 0
	[ $STOP = 1 ] && return 0
	nap "$1"
}

# Seconds since boot: the clock the watchdog counts on (busybox has /proc/uptime too).
now_s() {
	read -r up _ </proc/uptime
	echo "${up%.*}"
}

# Reads one argument a line from $1 into the positional parameters of `$2 ...`.
# No eval: arguments arrive as data, whatever quotes or $(...) they contain.
run_argv() {
	argv_file=$1
	shift
	while IFS= read -r a || [ -n "$a" ]; do set -- "$@" "$a"; done <"$argv_file"
	exec "$@"
}

# busybox without FEATURE_FLOAT_SLEEP (and some old sleeps) take whole seconds only.
FINE_NAP=1
if sleep 0.01 2>/dev/null; then FINE_NAP=0.1; fi

# A process group of its own (setsid), so one signal reaches every process it starts.
SETSID=
if command -v setsid >/dev/null 2>&1; then SETSID=setsid; fi

# The agent watches at SCHED_FIFO 1, the lowest real-time priority, where chrt allows: a load
# in a session of its own (setsid) can otherwise starve it for seconds on kernels with
# autogroups (seen: 1 s of settling took 8 s under stress-ng --pipe), and a watch that wakes
# late stamps phases late and can take a load's timely end for an early one. What it starts
# runs as it would without the agent: SCHED_OTHER ($NORMAL), cyclictest then setting its own.
NORMAL=
watch_at_fifo() {
	command -v chrt >/dev/null 2>&1 || return 0
	if chrt -f -p 1 $$ >/dev/null 2>&1; then NORMAL="chrt -o 0"; fi
}

signal_group() {
	kill "-$1" "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null
}

# How a process ended, from the status `wait` gave.
exit_text() {
	if [ "$2" -gt 128 ]; then
		printf '%s exited with signal %s' "$1" $(($2 - 128))
	else
		printf '%s exited with status %s' "$1" "$2"
	fi
}

# The line of a tool's log that says why it stopped: its last error, else its last line.
last_words() {
	line=$(grep -i -E 'error|fail|must|invalid|cannot|denied' "$1" 2>/dev/null | grep -v '^@rtlab' | tail -n 1)
	[ -n "$line" ] || line=$(grep -v '^@rtlab' "$1" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1)
	printf '%s' "$line" | tr -d '\000-\037' | cut -c1-200
}

# Processes the kernel's OOM killer has killed since boot ("-": this kernel does not say).
oom_kills() {
	n=$(sed -n 's/^oom_kill //p' /proc/vmstat 2>/dev/null)
	echo "${n:--}"
}

# The load's program as the user wrote it (stress-ng, or the command after taskset -c CPUS):
# named in reasons, and the name (comm) its process has.
load_program() {
	sed -n '1{/^taskset$/!{p;q;};};4p' "$1/load.argv"
}

# Every process of a load, even one that left its process group (a daemon: setsid, a double
# fork), is found again by its cgroup where the target has one to spare (v2, or v1's freezer
# or cpuacct hierarchy: mkdir there and cgroup.procs), else by the mark every process of the
# load inherits in its environment (RTLAB_LOAD). Both are written in the load's folder, so
# `agent.sh stop` finds them after an agent that died hard. RTLAB_LOAD_CGROUPS: the cgroup
# folders to try, in order ("" for none: the mark alone).
LOAD_CGROUPS=${RTLAB_LOAD_CGROUPS-/sys/fs/cgroup/freezer /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup}
load_cgroup() {
	for base in $LOAD_CGROUPS; do
		[ -f "$base/cgroup.procs" ] || continue
		if mkdir "$base/rtlab-load-$$" 2>/dev/null; then
			echo "$base/rtlab-load-$$"
			return 0
		fi
	done
}

# The PIDs of what is left of the load in folder $1 (zombies aside: they are only waiting to
# be reaped): its cgroup's, else those with its mark.
load_members() {
	if [ -f "$1/load.cgroup" ]; then
		pids=$(cat "$(cat "$1/load.cgroup")/cgroup.procs" 2>/dev/null)
	elif [ -f "$1/load.mark" ]; then
		mark="RTLAB_LOAD=$(cat "$1/load.mark")"
		pids=
		for env in /proc/[0-9]*/environ; do
			if tr '\000' '\n' <"$env" 2>/dev/null | grep -qxF "$mark"; then
				p=${env#/proc/}
				pids="$pids ${p%/environ}"
			fi
		done
	else
		return 0
	fi
	for p in $pids; do
		state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -c1)
		[ -z "$state" ] || [ "$state" = Z ] || echo "$p"
	done
}

# Ends what is left of the load in folder $1 (SIGTERM, SIGKILL after STOP_GRACE seconds) and
# removes its cgroup; LOAD_LEFT says what had outlived the load's process group.
load_sweep() {
	LOAD_LEFT=
	n=0 # what the group's SIGKILL ended may take a moment to go
	while [ -n "$(load_members "$1")" ] && [ $n -lt 5 ]; do
		sleep "$FINE_NAP"
		n=$((n + 1))
	done
	for pid in $(load_members "$1"); do
		LOAD_LEFT="$LOAD_LEFT${LOAD_LEFT:+,}$(tr -cd 'A-Za-z0-9_.+-' <"/proc/$pid/comm" 2>/dev/null)"
		kill -TERM "$pid" 2>/dev/null
	done
	since=$(now_s)
	while [ -n "$(load_members "$1")" ] && [ $(($(now_s) - since)) -lt "$STOP_GRACE" ]; do sleep 1; done
	# SIGKILL until none is left (for at most 100 naps): a member may fork between the listing
	# and the kill, and a killed process takes a moment to go (freeing its memory).
	n=0
	pids=$(load_members "$1")
	while [ -n "$pids" ] && [ $n -lt 100 ]; do
		for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
		sleep "$FINE_NAP"
		n=$((n + 1))
		pids=$(load_members "$1")
	done
	if [ -f "$1/load.cgroup" ]; then
		n=0 # the cgroup can be removed once its last process is reaped
		while ! rmdir "$(cat "$1/load.cgroup")" 2>/dev/null && [ $n -lt 20 ]; do
			sleep "$FINE_NAP"
			n=$((n + 1))
		done
	fi
}

load_start() {
	ld=$1
	LOAD_PROGRAM=$(load_program "$ld")
	OOM_BEFORE=$(oom_kills)
	rm -f "$ld/load.cgroup"
	LOAD_CG=$(load_cgroup)
	if [ -n "$LOAD_CG" ]; then echo "$LOAD_CG" >"$ld/load.cgroup"; fi
	echo "$$:$ld" >"$ld/load.mark"
	# The load may be the OOM killer's victim; the agent and cyclictest may not (see above).
	(
		echo 0 >/proc/self/oom_score_adj 2>/dev/null
		# into the load's cgroup before anything is started: /proc/self is this subshell here
		# (read is built in), and every process it starts is born inside
		if [ -n "$LOAD_CG" ]; then read -r self _ </proc/self/stat && echo "$self" >"$LOAD_CG/cgroup.procs"; fi
		RTLAB_LOAD="$$:$ld"
		export RTLAB_LOAD
		# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
		cd "$ld" && run_argv load.argv $NORMAL $SETSID
	) >"$ld/load.log" 2>&1 &
	STRESS_PID=$!
	LOAD_DIR=$ld
	echo "$STRESS_PID" >"$ld/load.pid"
}

# Ends the load: SIGTERM to its group, SIGKILL to what is left after STOP_GRACE seconds, then
# whatever of it left the group (load_sweep), named in load.log's last line.
load_stop() {
	ld=$1
	[ -n "$STRESS_PID" ] || return 0
	running=no
	if alive "$STRESS_PID"; then running=yes; fi
	signal_group TERM "$STRESS_PID"
	since=$(now_s)
	while alive "$STRESS_PID" && [ $(($(now_s) - since)) -lt $STOP_GRACE ]; do sleep 1; done
	ignored=no
	if alive "$STRESS_PID"; then ignored=yes; fi
	# Workers that outlived their parent (or ignored SIGTERM) still belong to its group.
	signal_group KILL "$STRESS_PID"
	wait_pid "$STRESS_PID"
	load_sweep "$ld"
	after=$(oom_kills)
	kills=-
	if [ "$after" != - ] && [ "$OOM_BEFORE" != - ]; then kills=$((after - OOM_BEFORE)); fi
	printf '@rtlab load-process exit=%s running_at_end=%s oom_kills=%s left=%s term_ignored=%s\n' \
		"$WAIT_RC" "$running" "$kills" "${LOAD_LEFT:--}" "$ignored" >>"$ld/load.log"
	STRESS_PID=
	LOAD_OOM_KILLS=$kills
}

# Memory and power while a load is measured, each where the target has it ("-" where not):
# MemAvailable and MemFree at their lowest, cyclictest's peak resident memory (VmHWM), and
# the mean power of hwmon's power sensors, else of the power supplies' power_now (both in
# microwatts), read once a second.
resources_reset() {
	MEM_AVAILABLE_MIN=-
	MEM_FREE_MIN=-
	CT_HWM=-
	POWER_UW_SUM=0
	POWER_N=0
	SAMPLED_AT=
	POWER_FILES=
	for f in "$ROOT"/sys/class/hwmon/hwmon*/power*_input; do
		[ -r "$f" ] && POWER_FILES="$POWER_FILES $f"
	done
	if [ -z "$POWER_FILES" ]; then
		for f in "$ROOT"/sys/class/power_supply/*/power_now; do
			[ -r "$f" ] && POWER_FILES="$POWER_FILES $f"
		done
	fi
}

resources_sample() {
	[ "$1" != "$SAMPLED_AT" ] || return 0
	SAMPLED_AT=$1
	# shellcheck disable=SC2046 # three numbers or dashes
	set -- $(awk -v fa="$MEM_AVAILABLE_MIN" -v ff="$MEM_FREE_MIN" -v fh="$CT_HWM" '
		function low(old, new) { return (new == "" ? old : (old == "-" || new + 0 < old + 0) ? new : old) }
		/^MemAvailable:/ { a = $2 } /^MemFree:/ { f = $2 } /^VmHWM:/ { h = $2 }
		END { print low(fa, a), low(ff, f), (h == "" ? fh : h) }' \
		"$ROOT/proc/meminfo" "$ROOT/proc/$CT_PID/status" 2>/dev/null)
	if [ $# = 3 ]; then
		MEM_AVAILABLE_MIN=$1
		MEM_FREE_MIN=$2
		CT_HWM=$3
	fi
	if [ -n "$POWER_FILES" ]; then
		# shellcheck disable=SC2086 # a list of paths without blanks
		uw=$(cat $POWER_FILES 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }')
		POWER_UW_SUM=$((POWER_UW_SUM + ${uw:-0}))
		POWER_N=$((POWER_N + 1))
	fi
}

resources_emit() {
	power=-
	if [ "$POWER_N" -gt 0 ]; then power=$((POWER_UW_SUM / POWER_N / 1000)); fi
	total=$(awk '/^MemTotal:/ { print $2 }' "$ROOT/proc/meminfo" 2>/dev/null)
	emit resources load="$1" mem_total_kb="${total:--}" mem_available_min_kb="$MEM_AVAILABLE_MIN" \
		mem_free_min_kb="$MEM_FREE_MIN" cyclictest_hwm_kb="$CT_HWM" power_mw="$power" \
		power_sources="$(echo "$POWER_FILES" | wc -w)"
}

# measure DIR SECONDS LOAD_LOG [PROBE]: runs cyclictest in DIR (its cyclictest.argv; the load's
# folder, or a segment's), or with PROBE the command of DIR/probe.argv (program first, its files
# then named probe.*), for SECONDS while watching it, the load (whose log is LOAD_LOG) and the
# clock. Sets REASON when the measurement cannot be vouched for.
measure() {
	mf=$1
	msecs=$2
	slog=$3
	tool=${4:-cyclictest}
	stem=cyclictest
	[ "$tool" = cyclictest ] || stem=probe
	(
		# Into the RT CPUs' cpuset partition first: outside it, those CPUs cannot be used.
		if [ -n "$CGROUP" ]; then echo 0 >"$ROOT$CGROUP/cgroup.procs"; fi
		cd "$mf" || exit 1
		# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
		if [ $stem = cyclictest ]; then
			run_argv cyclictest.argv $NORMAL $SETSID cyclictest --json=cyclictest.json.part
		else
			run_argv probe.argv $NORMAL $SETSID
		fi
	) >"$mf/$stem.out" 2>"$mf/$stem.log" &
	CT_PID=$!
	echo "$CT_PID" >"$mf/$stem.pid"
	start=$(now_s)
	stop_sent=
	killed=
	while alive "$CT_PID"; do
		t=$(($(now_s) - start))
		if [ -z "$REASON" ] && [ -n "$STRESS_PID" ] && ! alive "$STRESS_PID"; then
			REASON="$LOAD_PROGRAM ended after ${t} s of measuring: $(last_words "$slog")"
			kill -TERM "$CT_PID" 2>/dev/null
			stop_sent=$t
		elif [ -z "$REASON" ] && [ "$t" -ge $((msecs + GRACE)) ]; then
			REASON="no result ${GRACE} s after its planned end: $tool was killed"
			signal_group KILL "$CT_PID"
			killed=1
		fi
		if [ $STOP = 1 ] && [ -z "$stop_sent" ]; then stop_sent=$t; fi
		resources_sample "$t"
		if [ -n "$stop_sent" ] && [ -z "$killed" ] && [ $((t - stop_sent)) -ge $STOP_GRACE ]; then
			[ -n "$REASON" ] || REASON="$tool did not stop within ${STOP_GRACE} s of SIGTERM: it was killed"
			signal_group KILL "$CT_PID"
			killed=1
		fi
		# A second's sleep: the watch costs one wake-up a second. Near the planned end it looks
		# ten times a second (where sleep takes fractions), so the end is stamped within 0.1 s.
		if [ "$t" -ge $((msecs - 1)) ]; then nap $FINE_NAP; else nap 1; fi
	done
	wait_pid "$CT_PID"
	CT_PID=
	rc=$WAIT_RC
	# Whatever the tool started goes with it.
	signal_group KILL "$(cat "$mf/$stem.pid")"
	printf '@rtlab %s exit=%s\n' "$stem" "$rc" >>"$mf/$stem.log"
	if [ "$rc" = 0 ] && [ -s "$mf/$stem.json.part" ]; then
		mv "$mf/$stem.json.part" "$mf/$stem.json"
	elif [ -z "$REASON" ] && [ $STOP = 1 ] && [ "$rc" = 143 ]; then
		# Told to stop before it had set up its own SIGTERM handler: nothing was measured.
		REASON="stopped before $tool had measured anything"
	elif [ -z "$REASON" ] && [ "$rc" = 0 ] && [ $stem = probe ] && [ ! -e "$mf/$stem.json.part" ]; then
		: # a probe whose result is what it printed (rtla): read and checked on the host
	elif [ -z "$REASON" ] && [ "$rc" = 0 ]; then
		REASON="$tool exited with status 0 but its JSON is missing or empty ($stem.json.part)"
	elif [ -z "$REASON" ]; then
		REASON="$(exit_text "$tool" "$rc")"
		words=$(last_words "$mf/$stem.log")
		if [ -n "$words" ]; then REASON="$REASON: $words"; fi
	fi
}

# The probes besides cyclictest (rtlab run --probe), one after another under the same load in
# the order of DIR/plan.probes, each in loads/L/PROBE/ with its command in probe.argv. A probe
# that fails says why in its own event; the load's result is cyclictest's.
run_probes() {
	probes=$(cat "$DIR/plan.probes" 2>/dev/null)
	for probe in $probes; do
		pd=$1/$probe
		[ -f "$pd/probe.argv" ] || continue
		[ $STOP = 0 ] || return 0
		saved=$REASON
		REASON=
		rm -f "$pd/probe.json" "$pd/probe.json.part"
		emit probe-start load="$2" probe="$probe" seconds="$SECS"
		measure "$pd" "$SECS" "$1/load.log" "$probe"
		if [ -n "$REASON" ]; then
			emit probe-end load="$2" probe="$probe" status=failed reason="$REASON"
		elif [ $STOP = 1 ]; then
			emit probe-end load="$2" probe="$probe" status=partial
		else
			emit probe-end load="$2" probe="$probe" status=complete
		fi
		REASON=$saved
	done
}

# Soak runs: the measurement as back-to-back cyclictest runs of SEGMENT seconds, each whole
# on its own in loads/L/segments/NNN/ (its own JSON, output and log), so a target that dies
# loses at most the segment it was in. The gap between two segments is in their events.
measure_segments() {
	ld=$1
	done_s=0
	n=0
	while [ $STOP = 0 ] && [ -z "$REASON" ] && [ "$done_s" -lt "$SECS" ]; do
		n=$((n + 1))
		secs=$((SECS - done_s))
		[ "$secs" -le "$SEGMENT" ] || secs=$SEGMENT
		sd=$ld/segments/$(printf %03d "$n")
		mkdir -p "$sd"
		# The load's arguments, then the segment's own duration (cyclictest takes the last -D).
		{ cat "$ld/cyclictest.argv"; printf '%s\n%s\n' -D "$secs"; } >"$sd/cyclictest.argv"
		emit segment-start load="$2" n="$n" seconds="$secs"
		measure "$sd" "$secs" "$ld/load.log"
		if [ -f "$sd/cyclictest.json" ]; then
			emit segment-end load="$2" n="$n" status=complete
		else
			emit segment-end load="$2" n="$n" status=failed
		fi
		done_s=$((done_s + secs))
	done
	# The load's result is its segments: complete when each of them is.
	if [ -z "$REASON" ] && [ $STOP = 0 ]; then
		: >"$ld/segments/complete"
	fi
}

# --- spike causes: the trace pass ------------------------------------------------

# Where tracefs is mounted and writable (the newer path first), or nothing.
tracefs_dir() {
	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		if [ -w "$ROOT$d/trace_marker" ] && [ -w "$ROOT$d/set_event" ]; then
			printf '%s' "$ROOT$d"
			return 0
		fi
	done
	return 1
}

# What places a spike on its CPU: the scheduler's switches and wake-ups, hard and soft
# interrupts, NMIs and (x86) the local timer. Those a kernel lacks are skipped.
TRACE_EVENTS='sched:sched_switch sched:sched_waking irq:irq_handler_entry irq:irq_handler_exit
irq:softirq_entry irq:softirq_exit nmi:nmi_handler irq_vectors:local_timer_entry
irq_vectors:local_timer_exit'
TRACE_BUFFER_KB=2048

# What the trace pass changes in tracefs $1, as "file value" lines, then the enabled events
# as "event NAME" lines: saved before anything changes, so a crash can always be undone
# (`stop`), and read again after the restore (trace/tracefs.before and .after in the run).
tracefs_state() {
	printf 'dir %s\n' "$1"
	printf 'tracing_on %s\n' "$(cat "$1/tracing_on")"
	printf 'current_tracer %s\n' "$(cat "$1/current_tracer")"
	printf 'trace_clock %s\n' "$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$1/trace_clock")"
	# "7 (expanded: 1408)": a buffer never used yet takes its expanded size back.
	kb=$(sed -n 's/.*expanded: \([0-9]*\).*/\1/p' "$1/buffer_size_kb")
	[ -n "$kb" ] || kb=$(cut -d' ' -f1 "$1/buffer_size_kb")
	printf 'buffer_size_kb %s\n' "$kb"
	sed 's/^/event /' "$1/set_event"
	for f in tracing_thresh tracing_cpumask hwlat_detector/width hwlat_detector/window; do
		if [ -r "$1/$f" ]; then printf '%s %s\n' "$f" "$(cat "$1/$f")"; fi
	done
	# what rtla sets for the timerlat tracer and puts back itself, unless it is killed
	for f in "$1"/osnoise/*; do
		case ${f##*/} in options) continue ;; esac
		if [ -f "$f" ] && [ -r "$f" ]; then printf 'osnoise/%s %s\n' "${f##*/}" "$(cat "$f" 2>/dev/null)"; fi
	done
}

tracefs_save() {
	tracefs_state "$1" >"$TRACESAVE.part" && mv "$TRACESAVE.part" "$TRACESAVE"
}

tracefs_restore() {
	[ -n "$TRACESAVE" ] && [ -f "$TRACESAVE" ] || return 0
	t=$(sed -n 's/^dir //p' "$TRACESAVE")
	if [ -d "$t" ]; then
		echo 0 >"$t/tracing_on"
		: >"$t/set_event"
		while read -r f v; do
			case $f in
			event) echo "$v" >>"$t/set_event" ;;
			current_tracer | trace_clock | buffer_size_kb | osnoise/* | tracing_thresh | tracing_cpumask | hwlat_detector/*)
				echo "$v" >"$t/$f" 2>/dev/null
				;;
			esac
		done <"$TRACESAVE"
		: >"$t/trace"
		sed -n 's/^tracing_on //p' "$TRACESAVE" >"$t/tracing_on"
	fi
	rm -f "$TRACESAVE"
}

# The pass's tracefs set-up; prints the trace clock used (mono: the clock /proc/uptime and
# the events count on; otherwise the host places spikes by the agent's own events only).
tracefs_setup() {
	t=$1
	echo 0 >"$t/tracing_on"
	echo nop >"$t/current_tracer"
	echo "$TRACE_BUFFER_KB" >"$t/buffer_size_kb" 2>/dev/null
	: >"$t/set_event"
	for e in $TRACE_EVENTS; do
		if echo "$e" >>"$t/set_event" 2>/dev/null; then echo "$e"; fi
	done >"$2/events"
	if echo mono >"$t/trace_clock" 2>/dev/null; then echo mono; else sed -n 's/.*\[\(.*\)\].*/\1/p' "$t/trace_clock"; fi
}

# /proc/interrupts and /proc/softirqs once a second: level c's suspects.
irq_sampler() {
	while :; do
		read -r up _ </proc/uptime
		printf '@ t=%s\n' "$up"
		cat "$ROOT/proc/interrupts" 2>/dev/null
		printf '@ softirqs\n'
		cat "$ROOT/proc/softirqs" 2>/dev/null
		sleep 1
	done
}

# rtla with auto-analysis (rtla 6.3 and later) and the timerlat tracer in tracefs $1.
rtla_ready() {
	[ -n "$1" ] && grep -q timerlat "$1/available_tracers" 2>/dev/null &&
		rtla timerlat top --help 2>&1 | grep -q -- '--aa-only'
}

# Runs `rtla timerlat top --aa-only US` in folder $1 (its rtla.argv) for $2 seconds, in its
# own process group, watched like cyclictest: stopped with SIGINT (rtla then restores what it
# set) on a signal, killed GRACE seconds past its end. HIT is set to the uptime at which its
# output first said it hit the threshold (rtla itself looks once a second).
rtla_run() {
	rf=$1
	rsecs=$2
	HIT=
	# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
	(cd "$rf" && run_argv rtla.argv $NORMAL $SETSID rtla) >"$rf/rtla.out" 2>&1 &
	CT_PID=$!
	echo "$CT_PID" >"$rf/rtla.pid"
	rstart=$(now_s)
	sent=
	while alive "$CT_PID"; do
		if [ -z "$HIT" ] && grep -q 'hit stop tracing' "$rf/rtla.out" 2>/dev/null; then
			read -r HIT _ </proc/uptime
		fi
		t=$(($(now_s) - rstart))
		if [ -z "$REASON" ] && [ -n "$STRESS_PID" ] && ! alive "$STRESS_PID"; then
			REASON="$LOAD_PROGRAM ended during the trace pass: $(last_words "$ld/load.log")"
		fi
		if [ -z "$sent" ] && { [ $STOP = 1 ] || [ -n "$REASON" ] || [ "$t" -ge $((rsecs + GRACE)) ]; }; then
			signal_group INT "$CT_PID"
			sent=$t
		elif [ -n "$sent" ] && [ $((t - sent)) -ge $STOP_GRACE ]; then
			signal_group KILL "$CT_PID"
		fi
		nap "$FINE_NAP"
	done
	wait_pid "$CT_PID"
	CT_PID=
	printf '@rtlab rtla exit=%s\n' "$WAIT_RC" >>"$rf/rtla.out"
	if [ -z "$HIT" ] && grep -q 'hit stop tracing' "$rf/rtla.out"; then read -r HIT _ </proc/uptime; fi
}

# The next capture's folder under $1, numbered from 001.
next_capture() {
	n=$((n + 1))
	cf=$1/$(printf %03d $n)
	mkdir -p "$cf"
}

# After the measurement, under the same load: the tool again, now to learn why spikes
# happen, never what the latency is (tracing costs latency of its own).
#   level a (rtla with auto-analysis): `rtla timerlat top --aa-only US` stops at the first
#     latency above US and prints rtla's own analysis; its timerlat threads replace cyclictest.
#   level b (tracefs): cyclictest -b US --tracemark stops itself and the tracing at the first
#     sample above US; the spiking CPU's trace is kept.
#   level c (no tracefs): cyclictest --spike=US lists the spikes' times while the interrupt
#     counters are sampled: suspects, not causes.
# Levels a and b start again after each capture, until the pass's time or TRACE_SPIKES
# captures are used up.
trace_pass() {
	ld=$1
	name=$2
	td=$ld/trace
	rm -rf "$td"
	mkdir -p "$td"
	tfs=$(tracefs_dir) || tfs=
	level=c
	if [ -n "$tfs" ]; then
		case $TRACE_LEVEL in
		auto) if rtla_ready "$tfs"; then level=a; else level=b; fi ;;
		a) if rtla_ready "$tfs"; then level=a; else level=b; fi ;;
		b) level=b ;;
		esac
	fi
	saved_reason=$REASON
	REASON=
	n=0
	spikes=0
	pass_start=$(now_s)
	if [ $level = c ]; then
		emit trace-start load="$name" level=c seconds="$TRACE_SECS" threshold_us="$TRACE_US" clock=uptime asked="$TRACE_LEVEL"
		next_capture "$td"
		{ cat "$ld/trace.argv"; printf '%s\n' "--spike=$TRACE_US" --spike-nodes=1000 -D "$TRACE_SECS"; } >"$cf/cyclictest.argv"
		irq_sampler >"$cf/interrupts" &
		sampler=$!
		measure "$cf" "$TRACE_SECS" "$ld/load.log"
		kill "$sampler" 2>/dev/null
		wait "$sampler" 2>/dev/null
		spikes=$(sed -n 's/^spikes = \([0-9]*\).*/\1/p' "$cf/cyclictest.out" 2>/dev/null | first_line)
	else
		tracefs_save "$tfs"
		cp "$TRACESAVE" "$td/tracefs.before"
		if [ $level = b ]; then clock=$(tracefs_setup "$tfs" "$td"); else clock=uptime; fi
		emit trace-start load="$name" level=$level seconds="$TRACE_SECS" threshold_us="$TRACE_US" clock="$clock" asked="$TRACE_LEVEL"
		while [ $STOP = 0 ] && [ -z "$REASON" ] && [ $spikes -lt "$TRACE_SPIKES" ]; do
			left=$((TRACE_SECS - ($(now_s) - pass_start)))
			[ $left -ge 1 ] || break
			next_capture "$td"
			if [ $level = a ]; then
				{ cat "$ld/rtla.argv"; printf '%s\n' --aa-only "$TRACE_US" -d "${left}s"; } >"$cf/rtla.argv"
				rtla_run "$cf" "$left"
				[ -n "$HIT" ] || break
				cpu=$(sed -n 's/^## CPU \([0-9]*\) hit stop tracing.*/\1/p' "$cf/rtla.out" | first_line)
				spikes=$((spikes + 1))
				emit trace-spike load="$name" n="$n" cpu="${cpu:-?}" hit="$HIT"
				continue
			fi
			{ cat "$ld/trace.argv"; printf '%s\n' -b "$TRACE_US" --tracemark -D "$left"; } >"$cf/cyclictest.argv"
			: >"$tfs/trace"
			echo 1 >"$tfs/tracing_on"
			measure "$cf" "$left" "$ld/load.log"
			echo 0 >"$tfs/tracing_on"
			grep -q '^# Break thread' "$cf/cyclictest.out" 2>/dev/null || break
			cpu=$(sed -n 's/.*\[0*\([0-9][0-9]*\)\].*tracing_mark_write: hit latency.*/\1/p' "$tfs/trace" | first_line)
			if [ -n "$cpu" ] && [ -r "$tfs/per_cpu/cpu$cpu/trace" ]; then
				if command -v gzip >/dev/null 2>&1; then
					gzip -c "$tfs/per_cpu/cpu$cpu/trace" >"$cf/cpu$cpu.trace.gz"
				else
					cat "$tfs/per_cpu/cpu$cpu/trace" >"$cf/cpu$cpu.trace"
				fi
			fi
			spikes=$((spikes + 1))
			emit trace-spike load="$name" n="$n" cpu="${cpu:-?}"
		done
		tracefs_restore
		tracefs_state "$tfs" >"$td/tracefs.after"
	fi
	if [ -n "$REASON" ]; then
		emit trace-end load="$name" spikes="${spikes:-0}" reason="$REASON"
	else
		emit trace-end load="$name" spikes="${spikes:-0}"
	fi
	REASON=$saved_reason
}

# The load folder as a gzipped tar in base64, for targets that cannot fetch files later.
stream_result() {
	[ $STREAM = 1 ] || return 0
	printf '@rtlab result load=%s\n' "$1"
	(cd "$DIR" && tar -cf - "loads/$1" 2>/dev/null | gzip | base64)
	printf '@rtlab result-end load=%s\n' "$1"
}

# Ends what is still running, and waits for it: nothing outlives the agent.
cleanup() {
	if [ -n "$CT_PID" ]; then
		signal_group KILL "$CT_PID"
		wait "$CT_PID" 2>/dev/null
	fi
	if [ -n "$STRESS_PID" ]; then
		signal_group KILL "$STRESS_PID"
		wait "$STRESS_PID" 2>/dev/null
		STOP_GRACE=0 load_sweep "$LOAD_DIR"
	fi
	governors_restore
	tracefs_restore
	if [ -n "${DIR:-}" ]; then rm -f "$DIR/agent.pid"; fi
	lock_release
}

# --- run -------------------------------------------------------------------

run_load() {
	name=$1
	ld=$DIR/loads/$name
	REASON=
	[ -f "$ld/cyclictest.argv" ] || {
		emit load-end load="$name" status=failed reason=no plan for this load
		return 1
	}
	emit load-start load="$name" seconds="$SECS"
	rm -rf "$ld/cyclictest.json" "$ld/cyclictest.json.part" "$ld/segments"
	if [ -f "$ld/load.argv" ]; then
		load_start "$ld"
		pause "$SETTLE"
		if ! alive "$STRESS_PID"; then
			wait_pid "$STRESS_PID"
			REASON="$(exit_text "$LOAD_PROGRAM" "$WAIT_RC") before measuring: $(last_words "$ld/load.log")"
		fi
	fi
	if [ $STOP = 0 ] && [ -z "$REASON" ]; then
		emit measure-start load="$name"
		resources_reset
		if [ "$SEGMENT" -gt 0 ] 2>/dev/null; then
			measure_segments "$ld" "$name"
		else
			measure "$ld" "$SECS" "$ld/load.log"
		fi
		emit measure-end load="$name"
		resources_emit "$name"
		if [ $STOP = 0 ] && [ -z "$REASON" ]; then run_probes "$ld" "$name"; fi
		if [ "$TRACE_SECS" -gt 0 ] && [ $STOP = 0 ] && [ -z "$REASON" ]; then
			trace_pass "$ld" "$name"
		fi
	fi
	LOAD_OOM_KILLS=
	load_stop "$ld"
	rm -rf "$ld/scratch"
	if [ -z "$REASON" ] && [ $STOP = 0 ] && [ "$(cat "$ld/load.check" 2>/dev/null)" = oom-kill ]; then
		if [ "$LOAD_OOM_KILLS" = - ]; then
			REASON="an oom-kill load cannot be checked here: /proc/vmstat has no oom_kill (kernel 4.13 or later has)"
		elif [ "${LOAD_OOM_KILLS:-0}" -lt 1 ]; then
			REASON="the OOM killer killed nothing during the load: it never reached the out-of-memory condition"
		fi
	fi
	if [ -n "$REASON" ]; then
		status=failed
	elif [ -f "$ld/cyclictest.json" ] || [ -f "$ld/segments/complete" ]; then
		if [ $STOP = 1 ]; then status=partial; else status=complete; fi
	elif [ $STOP = 1 ] && load_result "$ld"; then
		status=partial # stopped between or during segments: those done are kept
	else
		status=failed
		REASON="stopped before measuring"
	fi
	if [ -n "$REASON" ]; then
		emit load-end load="$name" status=$status reason="$REASON"
	else
		emit load-end load="$name" status=$status
	fi
	stream_result "$name"
	[ $status = complete ]
}

# Whether the load folder $1 (or a segment of it) holds a cyclictest result.
load_result() {
	for f in "$1"/cyclictest.json "$1"/segments/*/cyclictest.json; do
		[ -f "$f" ] && return 0
	done
	return 1
}

# Whether any load of the run does.
any_result() {
	for d in "$DIR"/loads/*; do
		load_result "$d" && return 0
	done
	return 1
}

# The StarFive study leaves a board idle a few minutes after boot before measuring: wait
# until the system has been up IDLE_AFTER_BOOT seconds.
idle_after_boot() {
	[ "${IDLE_AFTER_BOOT:-0}" -gt 0 ] 2>/dev/null || return 0
	up=$(now_s)
	emit boot-idle up="$up" until="$IDLE_AFTER_BOOT" # said even when the system is up long enough
	while [ $STOP = 0 ] && [ "$(now_s)" -lt "$IDLE_AFTER_BOOT" ]; do nap 1; done
}

cmd_run() {
	[ $# -ge 1 ] || die "usage: agent.sh run DIR [--seconds S] [--settle S] [--governor G|keep] [--cgroup PATH] [--grace S] [--stream-results]"
	DIR=$1
	shift
	SECS=0
	SETTLE=0
	GOVERNOR=performance
	CGROUP=
	while [ $# -gt 0 ]; do
		case $1 in
		--stream-results)
			STREAM=1
			shift
			continue
			;;
		--cgroup) CGROUP=$2 ;;
		--seconds) SECS=$2 ;;
		--settle) SETTLE=$2 ;;
		--governor) GOVERNOR=$2 ;;
		--grace) GRACE=$2 ;;
		--segment) SEGMENT=$2 ;;
		--idle-after-boot) IDLE_AFTER_BOOT=$2 ;;
		--trace-seconds) TRACE_SECS=$2 ;;
		--trace-us) TRACE_US=$2 ;;
		--trace-spikes) TRACE_SPIKES=$2 ;;
		--trace-level) TRACE_LEVEL=$2 ;;
		*) die "unknown option $1" ;;
		esac
		shift 2
	done
	[ -f "$DIR/plan.loads" ] || die "$DIR/plan.loads is missing"
	EVENTS=$DIR/events
	GOVSAVE=$DIR/governors.saved
	TRACESAVE=$DIR/tracefs.saved
	trap on_signal INT TERM HUP
	trap cleanup EXIT
	if ! lock_take; then
		emit 'done' status=failed reason=another rtlab run is measuring on this system
		exit 1
	fi
	echo $$ >"$DIR/agent.pid"

	emit clock wall="$(date +%s)"
	echo -1000 >/proc/self/oom_score_adj 2>/dev/null
	watch_at_fifo
	idle_after_boot
	governors_set "$GOVERNOR"
	ran=0
	complete=0
	while IFS= read -r load || [ -n "$load" ]; do
		[ -n "$load" ] || continue
		[ $STOP = 0 ] || break
		ran=$((ran + 1))
		if run_load "$load"; then complete=$((complete + 1)); fi
	done <"$DIR/plan.loads"
	governors_restore

	if [ $complete -gt 0 ] && [ $complete = "$ran" ] && [ $STOP = 0 ]; then
		emit 'done' status=complete
	elif any_result; then
		emit 'done' status=partial
	else
		emit 'done' status=failed
	fi
}

# Ends the run in DIR: its agent first (it stops in order), then any cyclictest or load
# group it left behind (an agent killed with SIGKILL cannot: SIGTERM, then SIGKILL after
# STOP_GRACE seconds), then the saved governors.
cmd_stop() {
	[ $# -ge 1 ] || die "usage: agent.sh stop DIR"
	DIR=$1
	if [ -f "$DIR/agent.pid" ]; then
		pid=$(cat "$DIR/agent.pid")
		kill -TERM "$pid" 2>/dev/null
		n=0
		while alive "$pid" && [ $n -lt 60 ]; do
			sleep 1
			n=$((n + 1))
		done
	fi
	left=
	for f in "$DIR"/loads/*/cyclictest.pid "$DIR"/loads/*/segments/*/cyclictest.pid \
		"$DIR"/loads/*/trace/*/cyclictest.pid "$DIR"/loads/*/trace/*/rtla.pid "$DIR"/loads/*/load.pid \
		"$DIR"/loads/*/*/probe.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		tool=${f##*/}
		tool=${tool%.pid}
		if [ "$tool" = load ]; then
			tool=$(load_program "${f%/*}")
		elif [ "$tool" = probe ]; then
			tool=$(sed -n 1p "${f%/*}/probe.argv")
		fi
		if [ "$tool" != "${tool%/*}" ] || [ "${#tool}" -gt 15 ]; then
			tool=${tool##*/}
			tool=$(printf %.15s "$tool") # the kernel keeps 15 characters of a name
		fi
		# Only a group still led by the tool this run started: a reused PID is left alone.
		if alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$tool" ]; then
			signal_group TERM "$pid" # cyclictest writes what it measured on SIGTERM
			left="$left $pid"
		fi
	done
	n=0
	while [ $n -lt "$STOP_GRACE" ]; do
		alive_left=
		for pid in $left; do if alive "$pid"; then alive_left="$alive_left $pid"; fi; done
		[ -n "$alive_left" ] || break
		sleep 1
		n=$((n + 1))
	done
	for pid in $left; do signal_group KILL "$pid"; done # and whatever ignored SIGTERM
	n=0
	for pid in $left; do
		while alive "$pid" && [ $n -lt 100 ]; do
			sleep "$FINE_NAP"
			n=$((n + 1))
		done
	done
	# and what a load left outside its group (its cgroup, or its mark)
	for ld in "$DIR"/loads/*; do
		if [ -f "$ld/load.cgroup" ] || [ -f "$ld/load.mark" ]; then STOP_GRACE=0 load_sweep "$ld"; fi
	done
	# An agent that died hard left its saved governors behind: put them back.
	GOVSAVE=$DIR/governors.saved
	governors_restore
	TRACESAVE=$DIR/tracefs.saved
	tracefs_restore
}

# The hwlat tracer: a kernel thread spins with interrupts off on one CPU at a time and records
# each gap in the time stamp counter longer than THRESHOLD_US: time taken by firmware (SMIs),
# the hypervisor or the hardware, which no tuning of Linux removes. It spins, so it holds the
# lock: it never runs during a measurement.
cmd_hwlat() {
	[ $# -ge 3 ] || die "usage: agent.sh hwlat DIR SECONDS THRESHOLD_US [CPUMASK]"
	DIR=$1
	mkdir -p "$DIR" || die "cannot make $DIR"
	tfs=$(tracefs_dir) || tfs=
	if [ -z "$tfs" ] || ! grep -q hwlat "$tfs/available_tracers" 2>/dev/null; then
		emit trace-end spikes=0 reason=no hwlat tracer: a kernel with CONFIG_HWLAT_TRACER=y and tracefs mounted
		return 1
	fi
	trap on_signal INT TERM HUP
	trap cleanup EXIT
	if ! lock_take; then
		emit trace-end spikes=0 reason=another rtlab run is measuring on this system
		return 1
	fi
	TRACESAVE=$DIR/tracefs.saved
	tracefs_save "$tfs"
	cp "$TRACESAVE" "$DIR/tracefs.before"
	echo 0 >"$tfs/tracing_on"
	echo nop >"$tfs/current_tracer"
	: >"$tfs/trace"
	echo "$3" >"$tfs/tracing_thresh"
	if [ -n "${4:-}" ]; then echo "$4" >"$tfs/tracing_cpumask"; fi
	echo hwlat >"$tfs/current_tracer"
	# x86 guests have the hypervisor CPU flag; Xen and others name themselves in sysfs
	vm=no
	if grep -qw hypervisor "$ROOT/proc/cpuinfo" 2>/dev/null || [ -s "$ROOT/sys/hypervisor/type" ]; then vm=yes; fi
	emit trace-start level=hwlat seconds="$2" threshold_us="$3" hypervisor=$vm
	echo 1 >"$tfs/tracing_on"
	pause "$2"
	echo 0 >"$tfs/tracing_on"
	cat "$tfs/trace" >"$DIR/hwlat.trace"
	tracefs_restore
	tracefs_state "$tfs" >"$DIR/tracefs.after"
	emit trace-end spikes="$(grep -c 'inner/outer' "$DIR/hwlat.trace")"
	for f in hwlat.trace tracefs.before tracefs.after; do
		printf '@rtlab hwlat-file name=%s\n' "$f"
		cat "$DIR/$f"
	done
	printf '@rtlab hwlat-end\n'
}

cmd_file() {
	[ $# -ge 2 ] || die "usage: agent.sh file OP PATH [ARG]"
	op=$1
	path=$ROOT$2
	case $op in
	read) cat "$path" ;;
	write) printf '%s\n' "$3" >"$path" ;;
	exists) [ -e "$path" ] ;;
	glob)
		# No word splitting, only pathname expansion of the pattern.
		IFS=
		for p in $path; do
			if [ -e "$p" ]; then printf '%s\n' "${p#"$ROOT"}"; fi
		done
		;;
	append64) mkdir -p "${path%/*}" && printf '%s' "$3" | base64 -d >>"$path" ;;
	rename) mv -f "$path" "$ROOT$3" ;;
	remove) rm -f "$path" ;;
	mkdir) mkdir "$path" ;;
	rmdir) rmdir "$path" ;;
	*) die "unknown file operation $op" ;;
	esac
}

# --- stressors (rtlab scan) ---------------------------------------------------

# stress-ng's stressors on this system: all of them, then those of each CLASS asked for.
cmd_stressors() {
	if ! command -v stress-ng >/dev/null 2>&1; then
		printf '@rtlab missing name=stress-ng\n'
		return 1
	fi
	printf '@rtlab stressors class=all names=%s\n' "$(stress-ng --stressors 2>/dev/null | tr -s ' \n' ',,' | sed 's/^,//; s/,$//')"
	for class in "$@"; do
		line=$(stress-ng --class "$class?" 2>&1 | sed -n 's/^class .* stressors: *//p')
		if [ -n "$line" ]; then
			printf '@rtlab stressors class=%s names=%s\n' "$class" "$(printf '%s' "$line" | tr -s ' ' ',')"
		else
			printf '@rtlab stressors class=%s names=\n' "$class"
		fi
	done
}

# --- LAVA (rtlab lava job) -------------------------------------------------------
# LAVA: each load's outcome as LAVA test cases, after the measurement (never during it: console
# output adds latency). lava-test-set and lava-test-case come with LAVA's test shell; outside
# one, the calls are printed.
cmd_lava_report() {
	[ $# -ge 1 ] || die "usage: agent.sh lava-report DIR [DEADLINE_US]"
	DIR=$1
	deadline=${2:-0}
	while read -r load; do
		[ -n "$load" ] || continue
		status=$(sed -n "s/^@rtlab load-end .* load=$load status=\([a-z-]*\).*/\1/p" "$DIR/events" 2>/dev/null | tail -n 1)
		lava_call lava-test-set start "$load"
		if [ "$status" = complete ]; then result=pass; else result=fail; fi
		lava_call lava-test-case "$load" --result "$result"
		# per CPU: min, avg, max (with the deadline's verdict) and p99.99 from cyclictest's JSON,
		# the load's own or its segments' (a soak run) taken together
		ld=$DIR/loads/$load
		limit=$(sed -n '/^-h$/{n;p;}' "$ld/cyclictest.argv" 2>/dev/null | first_line)
		if [ -f "$ld/cyclictest.json" ]; then set -- "$ld/cyclictest.json"; else set -- "$ld"/segments/*/cyclictest.json; fi
		for f in "$@"; do
			if [ -f "$f" ]; then tr -d ' \n\t' <"$f" && echo; fi
		done | lava_latencies "${limit:-0}" |
			while read -r cpu min max avg p9999 bound; do
				lava_call lava-test-case "$load.cpu$cpu-min-latency" --result pass --measurement "$min" --units us
				lava_call lava-test-case "$load.cpu$cpu-avg-latency" --result pass --measurement "$avg" --units us
				verdict=pass
				if [ "$deadline" -gt 0 ] && [ "$max" -gt "$deadline" ]; then verdict=fail; fi
				lava_call lava-test-case "$load.cpu$cpu-max-latency" --result "$verdict" --measurement "$max" --units us
				# above the histogram's range p99.99 is only known to be at least its limit:
				# LAVA's result then says unknown, never pass
				if [ "$bound" = lower ]; then result=unknown; else result=pass; fi
				[ "$p9999" = - ] || lava_call lava-test-case "$load.cpu$cpu-p99.99-latency" --result "$result" --measurement "$p9999" --units us
			done
		lava_call lava-test-set stop
	done <"$DIR/plan.loads"
}

# cyclictest's JSON, one document a line with whitespace removed (several: a soak run's
# segments) -> per CPU: cpu min max avg p99.99 exact|lower, the segments' threads of a CPU
# taken together as rtlab does on the host (cycles and bins summed, avg weighted by cycles).
# p99.99 is the nearest-rank percentile of all cycles; cycles beyond the histogram overflowed.
# A thread without its numbers is left out; p99.99 is "-" without samples or a known range.
lava_latencies() {
	awk -v limit="$1" '
	{
		n = split($0, part, "\"histogram\":[{]")
		for (i = 2; i <= n; i++) {
			end = index(part[i], "}")
			rest = substr(part[i], end + 1)
			cpu = field(rest, "cpu")
			c = field(rest, "cycles"); lo = field(rest, "min"); hi = field(rest, "max"); a = field(rest, "avg")
			if (cpu == "-" || c == "-" || lo == "-" || hi == "-" || a == "-") continue
			if (!(cpu in cycles)) { order[++cpus] = cpu; cycles[cpu] = 0; sum[cpu] = 0; top[cpu] = -1 }
			if (!(cpu in min) || lo + 0 < min[cpu]) min[cpu] = lo + 0
			if (!(cpu in max) || hi + 0 > max[cpu]) max[cpu] = hi + 0
			sum[cpu] += a * c
			cycles[cpu] += c
			m = split(substr(part[i], 1, end - 1), kv, ",")
			for (j = 1; j <= m; j++) {
				if (split(kv[j], pair, ":") != 2) continue
				us = pair[1]; gsub(/"/, "", us); us += 0
				bins[cpu, us] += pair[2]
				if (us > top[cpu]) top[cpu] = us
			}
		}
	}
	END {
		for (k = 1; k <= cpus; k++) {
			cpu = order[k]
			q = 99.99 / 100.0 * cycles[cpu]
			rank = int(q); if (rank < q) rank++; if (rank < 1) rank = 1
			p = "-"; seen = 0
			for (us = 0; us <= top[cpu] && p == "-"; us++) {
				seen += bins[cpu, us]
				if (seen >= rank) p = us
			}
			bound = "exact"
			if (p == "-" && cycles[cpu] > 0 && limit > 0) { p = limit; bound = "lower" }
			avg = cycles[cpu] ? sum[cpu] / cycles[cpu] : 0
			printf "%s %d %d %.2f %s %s\n", cpu, min[cpu], max[cpu], avg, p, bound
		}
	}
	function field(text, key,   at) {
		if (!match(text, "\"" key "\":[-0-9.]+")) return "-"
		at = substr(text, RSTART, RLENGTH)
		sub(/^[^:]*:/, "", at)
		return at
	}'
}

lava_call() {
	if command -v "$1" >/dev/null 2>&1; then "$@"; else echo "$*"; fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
sysinfo) cmd_sysinfo ;;
preflight) cmd_preflight "$@" ;;
run) cmd_run "$@" ;;
stop) cmd_stop "$@" ;;
hwlat) cmd_hwlat "$@" ;;
stressors) cmd_stressors "$@" ;;
lava-report) cmd_lava_report "$@" ;;
file) cmd_file "$@" ;;
*) die "usage: agent.sh sysinfo | preflight PRIO | run DIR [options] | stop DIR | hwlat DIR S US | stressors [CLASS...] | lava-report DIR [DEADLINE_US] | file OP PATH [ARG]" ;;
esac
