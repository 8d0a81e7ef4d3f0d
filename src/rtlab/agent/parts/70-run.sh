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
	rm -f "$ld/load.log"
	if [ -f "$ld/load.argv" ] && load_prepare "$ld" && [ $STOP = 0 ]; then
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
	[ $# -ge 1 ] || die "usage: agent.sh run DIR [options: rtlab.agent.contract]"
	DIR=$1
	shift
	run_options "$@"
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
		"$DIR"/loads/*/load.prepare.pid \
		"$DIR"/loads/*/*/probe.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		tool=${f##*/}
		tool=${tool%.pid}
		if [ "$tool" = load ]; then
			tool=$(load_program "${f%/*}")
		elif [ "$tool" = load.prepare ]; then
			tool=$(sed -n 1p "${f%/*}/load.prepare.argv")
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

