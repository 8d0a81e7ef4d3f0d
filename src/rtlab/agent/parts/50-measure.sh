# --- measuring -------------------------------------------------------------

on_signal() {
	GOT_SIGNAL=1
	[ $STOP = 1 ] && return
	STOP=1
	# SIGKILL: a sleep just forked keeps the shell's handlers until it clears them, and a
	# SIGTERM caught there is lost (dash, busybox ash): the nap would be slept whole
	if [ -n "$SLEEP_PID" ]; then kill -KILL "$SLEEP_PID" 2>/dev/null; fi
	# the tool's own stop (CT_STOP), so what was measured is kept.
	if [ -n "$CT_PID" ]; then kill "-$CT_STOP" "$CT_PID" 2>/dev/null; fi
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

# Sleeps $1 seconds (fractions where sleep takes them); a signal cuts it short. $2: STOP as
# the caller last saw it (else as it is now).
nap() {
	nap_stop=${2:-$STOP}
	sleep "$1" &
	SLEEP_PID=$!
	# a stop that came since the caller looked, or while sleep was forked, found no SLEEP_PID
	# to end: the whole nap would be slept (a Ctrl-C as an hwlat pass began left its 10
	# minutes to run)
	if [ "$STOP" != "$nap_stop" ]; then kill -KILL "$SLEEP_PID" 2>/dev/null; fi
	wait_pid "$SLEEP_PID"
	SLEEP_PID=
}

pause() {
	[ "$1" -gt 0 ] 2>/dev/null || return 0
	[ $STOP = 1 ] && return 0
	nap "$1" 0
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
FINE_NAP=1 NAPS_A_SECOND=1
if sleep 0.0 2>/dev/null; then FINE_NAP=0.1 NAPS_A_SECOND=10; fi # at once: each agent call runs it

# Waits while process $1 lives, $2 seconds at least, looking every FINE_NAP: a tool told to
# end is usually gone in a fraction of a second, which a whole second's sleep would add to each
# load. Naps are counted, not the clock read: never less than $2 s, and never more naps.
wait_gone() {
	gone_naps=0
	while alive "$1" && [ $gone_naps -lt $(($2 * NAPS_A_SECOND)) ]; do
		sleep "$FINE_NAP"
		gone_naps=$((gone_naps + 1))
	done
}

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
	# the shell's 128+N for a signal N (at most 64 on Linux): above, a status such as 255
	if [ "$2" -gt 128 ] && [ "$2" -le 192 ]; then
		printf '%s exited with signal %s' "$1" $(($2 - 128))
	else
		printf '%s exited with status %s' "$1" "$2"
	fi
}

# The line of a tool's log that says why it stopped: its last error, else its last line,
# quoted for an event's reason: one line, no control character, and no `=` (a load's output
# must not add fields such as "load=idle status=complete" to the event it is copied into).
last_words() {
	line=$(grep -i -E 'error|fail|must|invalid|cannot|denied' "$1" 2>/dev/null | grep -v "^$EVENT_MARK" | tail -n 1)
	[ -n "$line" ] || line=$(grep -v "^$EVENT_MARK" "$1" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1)
	printf '%s' "$line" | tr -d '\000-\037' | tr '=' ':' | cut -c1-200
}

# Processes the kernel's OOM killer has killed since boot ("-": this kernel does not say).
oom_kills() {
	n=$(sed -n 's/^oom_kill //p' /proc/vmstat 2>/dev/null)
	echo "${n:--}"
}

# The load's program as the user wrote it (stress-ng, or the command after taskset -c CPUS):
# named in reasons, and the name (comm) its process has.
load_program() {
	sed -n '1{/^taskset$/!{p;q;};};4p' "$1/$F_LOAD_ARGV"
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
	if [ -f "$1/$F_LOAD_CGROUP" ]; then
		pids=$(cat "$(cat "$1/$F_LOAD_CGROUP")/cgroup.procs" 2>/dev/null)
	elif [ -f "$1/$F_LOAD_MARK" ]; then
		mark="RTLAB_LOAD=$(cat "$1/$F_LOAD_MARK")"
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
	if [ -f "$1/$F_LOAD_CGROUP" ]; then
		n=0 # the cgroup can be removed once its last process is reaped
		while ! rmdir "$(cat "$1/$F_LOAD_CGROUP")" 2>/dev/null && [ $n -lt 20 ]; do
			sleep "$FINE_NAP"
			n=$((n + 1))
		done
	fi
}

# Runs the load's preparation in folder $1 (its load.prepare.argv: a kernel tree unpacked and
# configured for kcompile) to its end, unmeasured, its output in load.log; a preparation that
# fails, or outlasts PREPARE_LIMIT seconds, sets REASON and the load is not started.
load_prepare() {
	ld=$1
	[ -f "$ld/$F_LOAD_PREPARE_ARGV" ] || return 0
	(
		# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
		cd "$ld" && run_argv "$F_LOAD_PREPARE_ARGV" $NORMAL $SETSID
	) >"$ld/$F_LOAD_LOG" 2>&1 &
	pid=$!
	echo "$pid" >"$ld/$F_LOAD_PREPARE_PID" # `agent.sh stop` ends it after an agent that died
	since=$(now_s)
	while alive "$pid" && [ $STOP = 0 ] && [ $(($(now_s) - since)) -lt "$PREPARE_LIMIT" ]; do sleep 1; done
	if alive "$pid"; then
		signal_group KILL "$pid"
		wait_pid "$pid"
		rm -f "$ld/$F_LOAD_PREPARE_PID"
		[ $STOP = 1 ] || REASON="the load's preparation did not end within $PREPARE_LIMIT s"
		return 1
	fi
	wait_pid "$pid"
	rm -f "$ld/$F_LOAD_PREPARE_PID"
	if [ "$WAIT_RC" != 0 ]; then
		REASON="the load's preparation: $(exit_text "$(sed -n 1p "$ld/$F_LOAD_PREPARE_ARGV")" "$WAIT_RC"): $(last_words "$ld/$F_LOAD_LOG")"
		return 1
	fi
	say "$M_LOAD_PREPARED" seconds="$(($(now_s) - since))" >>"$ld/$F_LOAD_LOG"
}

load_start() {
	ld=$1
	LOAD_PROGRAM=$(load_program "$ld")
	OOM_BEFORE=$(oom_kills)
	rm -f "$ld/$F_LOAD_CGROUP"
	LOAD_CG=$(load_cgroup)
	if [ -n "$LOAD_CG" ]; then echo "$LOAD_CG" >"$ld/$F_LOAD_CGROUP"; fi
	echo "$$:$ld" >"$ld/$F_LOAD_MARK"
	# The load may be the OOM killer's victim; the agent and cyclictest may not (see above).
	(
		echo 0 >/proc/self/oom_score_adj 2>/dev/null
		# into the load's cgroup before anything is started: /proc/self is this subshell here
		# (read is built in), and every process it starts is born inside
		if [ -n "$LOAD_CG" ]; then read -r self _ </proc/self/stat && echo "$self" >"$LOAD_CG/cgroup.procs"; fi
		RTLAB_LOAD="$$:$ld"
		export RTLAB_LOAD
		# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
		cd "$ld" && run_argv "$F_LOAD_ARGV" $NORMAL $SETSID
	) >>"$ld/$F_LOAD_LOG" 2>&1 &
	STRESS_PID=$!
	LOAD_DIR=$ld
	echo "$STRESS_PID" >"$ld/$F_LOAD_PID"
}

# Ends the load: SIGTERM to its group, SIGKILL to what is left after STOP_GRACE seconds, then
# whatever of it left the group (load_sweep), named in load.log's last line.
load_stop() {
	ld=$1
	[ -n "$STRESS_PID" ] || return 0
	running=no
	if alive "$STRESS_PID"; then running=yes; fi
	signal_group TERM "$STRESS_PID"
	wait_gone "$STRESS_PID" "$STOP_GRACE"
	ignored=no
	if alive "$STRESS_PID"; then ignored=yes; fi
	# Workers that outlived their parent (or ignored SIGTERM) still belong to its group.
	signal_group KILL "$STRESS_PID"
	wait_pid "$STRESS_PID"
	load_sweep "$ld"
	after=$(oom_kills)
	kills=-
	if [ "$after" != - ] && [ "$OOM_BEFORE" != - ]; then kills=$((after - OOM_BEFORE)); fi
	say "$M_LOAD_PROCESS" exit="$WAIT_RC" running_at_end="$running" oom_kills="$kills" left="${LOAD_LEFT:--}" \
		term_ignored="$ignored" >>"$ld/$F_LOAD_LOG"
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
	emit "$E_RESOURCES" load="$1" mem_total_kb="${total:--}" mem_available_min_kb="$MEM_AVAILABLE_MIN" \
		mem_free_min_kb="$MEM_FREE_MIN" cyclictest_hwm_kb="$CT_HWM" power_mw="$power" \
		power_sources="$(echo "$POWER_FILES" | wc -w)"
}

# measure DIR SECONDS LOAD_LOG [PROBE]: runs cyclictest in DIR (its $F_CYCLICTEST_ARGV; the load's
# folder, or a segment's), or with PROBE the command of DIR/$F_PROBE_ARGV (program first, its files
# then the probe's), for SECONDS while watching it, the load (whose log is LOAD_LOG) and the
# clock. Sets REASON when the measurement cannot be vouched for.
measure() {
	mf=$1
	duration_s=$2
	slog=$3
	tool=${4:-cyclictest}
	# the tool's files in DIR: cyclictest's, or a probe's
	if [ "$tool" = cyclictest ]; then
		m_argv=$F_CYCLICTEST_ARGV m_json=$F_CYCLICTEST_JSON m_out=$F_CYCLICTEST_OUT
		m_log=$F_CYCLICTEST_LOG m_pid=$F_CYCLICTEST_PID m_mark=$M_CYCLICTEST
	else
		m_argv=$F_PROBE_ARGV m_json=$F_PROBE_JSON m_out=$F_PROBE_OUT
		m_log=$F_PROBE_LOG m_pid=$F_PROBE_PID m_mark=$M_PROBE
	fi
	# rtla is given RTLA_START seconds to start (it reads every event format tracefs has
	# first) and is stopped as it stops itself (CT_STOP); what it sets in tracefs is saved
	# first, put back here (or by the cleanup) if it did not end well: killed, it leaves its
	# tracer on.
	m_start=0
	m_program=
	if [ "$tool" != cyclictest ]; then m_program=$(sed -n 1p "$mf/$m_argv"); fi
	if [ "${m_program##*/}" = rtla ]; then
		m_start=$RTLA_START
		CT_STOP=INT
		if m_tfs=$(tracefs_dir); then rtla_save "$m_tfs"; fi
	fi
	(
		# Into the RT CPUs' cpuset partition first: outside it, those CPUs cannot be used.
		if [ -n "$CGROUP" ]; then echo 0 >"$ROOT$CGROUP/cgroup.procs"; fi
		cd "$mf" || exit 1
		# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
		if [ "$tool" = cyclictest ]; then
			run_argv "$m_argv" $NORMAL $SETSID cyclictest --json="$m_json$F_PART"
		else
			# $_ in its environment names the tool's file: svsematest keys its semaphore by
			# ftok() of the file $_ (else argv[0]) names, which a bare name is not
			p0=$(command -v "$(sed -n 1p "$m_argv")") || p0=
			run_argv "$m_argv" $NORMAL $SETSID ${p0:+env "_=$p0"}
		fi
	) >"$mf/$m_out" 2>"$mf/$m_log" &
	CT_PID=$!
	echo "$CT_PID" >"$mf/$m_pid"
	start=$(now_s)
	stop_sent=
	killed=
	while alive "$CT_PID"; do
		t=$(($(now_s) - start))
		if [ -z "$REASON" ] && [ -n "$STRESS_PID" ] && ! alive "$STRESS_PID"; then
			REASON="$LOAD_PROGRAM ended after ${t} s of measuring: $(last_words "$slog")"
			kill "-$CT_STOP" "$CT_PID" 2>/dev/null
			stop_sent=$t
		elif [ -z "$REASON$stop_sent" ] && [ "$t" -ge $((duration_s + m_start + GRACE_S)) ]; then
			if [ "$CT_STOP" = INT ]; then
				# rtla's stop: it prints what it has and puts its tracer back; killed STOP_GRACE later
				REASON="no result $((m_start + GRACE_S)) s after its planned end: $tool was stopped"
				signal_group INT "$CT_PID"
				stop_sent=$t
			else
				REASON="no result ${GRACE_S} s after its planned end: $tool was killed"
				signal_group KILL "$CT_PID"
				killed=1
			fi
		fi
		if [ $STOP = 1 ] && [ -z "$stop_sent" ]; then
			# told again: a stop as the tool was forked found no CT_PID to tell, or reached
			# it before it had its own handler (its SIGTERM lost), and it would measure on
			# until STOP_GRACE killed it, losing what it measured. Not rtla's SIGINT: rtla
			# is stopped once, as it expects (it ignores SIGINT while it starts).
			if [ "$CT_STOP" = TERM ]; then kill -TERM "$CT_PID" 2>/dev/null; fi
			stop_sent=$t
		fi
		resources_sample "$t"
		if [ -n "$stop_sent" ] && [ -z "$killed" ] && [ $((t - stop_sent)) -ge $STOP_GRACE ]; then
			[ -n "$REASON" ] || REASON="$tool did not stop within ${STOP_GRACE} s of SIG$CT_STOP: it was killed"
			signal_group KILL "$CT_PID"
			killed=1
		fi
		# A second's sleep: the watch costs one wake-up a second. Near the planned end it looks
		# ten times a second (where sleep takes fractions), so the end is stamped within 0.1 s.
		if [ "$t" -ge $((duration_s - 1)) ]; then nap $FINE_NAP; else nap 1; fi
	done
	wait_pid "$CT_PID"
	CT_PID=
	rc=$WAIT_RC
	# Whatever the tool started goes with it.
	signal_group KILL "$(cat "$mf/$m_pid")"
	say "$m_mark" exit="$rc" >>"$mf/$m_log"
	if [ "$CT_STOP" = INT ]; then
		if [ "$rc" = 0 ]; then rm -f "$TRACESAVE"; else tracefs_restore; fi
		CT_STOP=TERM
	fi
	if [ "$rc" = 0 ] && [ -s "$mf/$m_json$F_PART" ]; then
		mv "$mf/$m_json$F_PART" "$mf/$m_json"
	elif [ -z "$REASON" ] && [ $STOP = 1 ] && [ "$rc" = 143 ]; then
		# Told to stop before it had set up its own SIGTERM handler: nothing was measured.
		REASON="stopped before $tool had measured anything"
	elif [ -z "$REASON" ] && [ "$rc" = 0 ] && [ "$tool" != cyclictest ] && [ ! -e "$mf/$m_json$F_PART" ]; then
		: # a probe whose result is what it printed (rtla): read and checked on the host
	elif [ -z "$REASON" ] && [ "$rc" = 0 ]; then
		REASON="$tool exited with status 0 but its JSON is missing or empty ($m_json$F_PART)"
	elif [ -z "$REASON" ]; then
		REASON="$(exit_text "$tool" "$rc")"
		words=$(last_words "$mf/$m_log")
		if [ -n "$words" ]; then REASON="$REASON: $words"; fi
	fi
}

# The probes besides cyclictest (rtlab run --probe), one after another under the same load in
# the order of DIR/$F_PLAN_PROBES, each in loads/L/PROBE/ with its command in $F_PROBE_ARGV. A
# probe that fails says why in its own event; the load's result is cyclictest's.
run_probes() {
	probes=$(cat "$DIR/$F_PLAN_PROBES" 2>/dev/null)
	for probe in $probes; do
		pd=$1/$probe
		[ -f "$pd/$F_PROBE_ARGV" ] || continue
		[ $STOP = 0 ] || return 0
		saved=$REASON
		REASON=
		rm -f "$pd/$F_PROBE_JSON" "$pd/$F_PROBE_JSON$F_PART"
		emit "$E_PROBE_START" load="$2" probe="$probe" seconds="$DURATION_S"
		measure "$pd" "$DURATION_S" "$1/$F_LOAD_LOG" "$probe"
		# stopped (Ctrl-C, the host's stop): cut short, not failed, whatever its exit said
		if [ $STOP = 1 ] && [ -n "$REASON" ]; then
			emit "$E_PROBE_END" load="$2" probe="$probe" status=partial reason="$REASON"
		elif [ $STOP = 1 ]; then
			emit "$E_PROBE_END" load="$2" probe="$probe" status=partial
		elif [ -n "$REASON" ]; then
			emit "$E_PROBE_END" load="$2" probe="$probe" status=failed reason="$REASON"
		else
			emit "$E_PROBE_END" load="$2" probe="$probe" status=complete
		fi
		REASON=$saved
	done
}

# Soak runs: the measurement as back-to-back cyclictest runs of SEGMENT_S seconds, each whole
# on its own in loads/L/$F_SEGMENTS/NNN/ (its own JSON, output and log), so a target that dies
# loses at most the segment it was in. The gap between two segments is in their events.
measure_segments() {
	ld=$1
	done_s=0
	n=0
	while [ $STOP = 0 ] && [ -z "$REASON" ] && [ "$done_s" -lt "$DURATION_S" ]; do
		n=$((n + 1))
		segment_s=$((DURATION_S - done_s))
		[ "$segment_s" -le "$SEGMENT_S" ] || segment_s=$SEGMENT_S
		sd=$ld/$F_SEGMENTS/$(printf %03d "$n")
		mkdir -p "$sd"
		# The load's arguments, then the segment's own duration (cyclictest takes the last one).
		{ cat "$ld/$F_CYCLICTEST_ARGV"; ct_duration "$segment_s"; } >"$sd/$F_CYCLICTEST_ARGV"
		emit "$E_SEGMENT_START" load="$2" n="$n" seconds="$segment_s"
		measure "$sd" "$segment_s" "$ld/$F_LOAD_LOG"
		if [ -f "$sd/$F_CYCLICTEST_JSON" ]; then
			emit "$E_SEGMENT_END" load="$2" n="$n" status=complete
		else
			emit "$E_SEGMENT_END" load="$2" n="$n" status=failed
		fi
		done_s=$((done_s + segment_s))
	done
	# The load's result is its segments: complete when each of them is.
	if [ -z "$REASON" ] && [ $STOP = 0 ]; then
		: >"$ld/$F_SEGMENTS/$F_SEGMENTS_COMPLETE"
	fi
}
