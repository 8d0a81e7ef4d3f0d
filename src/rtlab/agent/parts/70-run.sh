# --- run -------------------------------------------------------------------

run_load() {
	name=$1
	ld=$DIR/$F_LOADS/$name
	REASON=
	[ -f "$ld/$F_CYCLICTEST_ARGV" ] || {
		emit "$E_LOAD_END" load="$name" status=failed reason=no plan for this load
		return 1
	}
	emit "$E_LOAD_START" load="$name" seconds="$DURATION_S"
	rm -rf "$ld/${F_CYCLICTEST_JSON:?}" "$ld/$F_CYCLICTEST_JSON${F_PART:?}" "$ld/${F_SEGMENTS:?}"
	rm -f "$ld/$F_LOAD_LOG"
	if [ -f "$ld/$F_LOAD_ARGV" ] && load_prepare "$ld" && [ $STOP = 0 ]; then
		load_start "$ld"
		pause "$SETTLE_S"
		if ! alive "$STRESS_PID"; then
			wait_pid "$STRESS_PID"
			REASON="$(exit_text "$LOAD_PROGRAM" "$WAIT_RC") before measuring: $(last_words "$ld/$F_LOAD_LOG")"
		fi
	fi
	if [ $STOP = 0 ] && [ -z "$REASON" ]; then
		emit "$E_MEASURE_START" load="$name"
		resources_reset
		if [ "$SEGMENT_S" -gt 0 ] 2>/dev/null; then
			measure_segments "$ld" "$name"
		else
			measure "$ld" "$DURATION_S" "$ld/$F_LOAD_LOG"
		fi
		emit "$E_MEASURE_END" load="$name"
		resources_emit "$name"
		if [ $STOP = 0 ] && [ -z "$REASON" ]; then run_probes "$ld" "$name"; fi
		if [ "$TRACE_S" -gt 0 ] && [ $STOP = 0 ] && [ -z "$REASON" ]; then
			trace_pass "$ld" "$name"
		fi
	fi
	LOAD_OOM_KILLS=
	load_stop "$ld"
	rm -rf "$ld/${F_SCRATCH:?}"
	if [ -z "$REASON" ] && [ $STOP = 0 ] && [ "$(cat "$ld/$F_LOAD_CHECK" 2>/dev/null)" = oom-kill ]; then
		if [ "$LOAD_OOM_KILLS" = - ]; then
			REASON="an oom-kill load cannot be checked here: /proc/vmstat has no oom_kill (kernel 4.13 or later has)"
		elif [ "${LOAD_OOM_KILLS:-0}" -lt 1 ]; then
			REASON="the OOM killer killed nothing during the load: it never reached the out-of-memory condition"
		fi
	fi
	# a CPU starved for the whole load, or for each segment of a soak run: the agent's word
	# (and LAVA's result) is the host's
	if [ -z "$REASON" ] && [ $STOP = 0 ] && [ -f "$ld/$F_CYCLICTEST_JSON" ]; then
		idle=$(idle_threads "$ld/$F_CYCLICTEST_JSON")
		if [ -n "$idle" ]; then REASON="$F_CYCLICTEST_JSON: $idle"; fi
	elif [ -z "$REASON" ] && [ $STOP = 0 ] && [ -f "$ld/$F_SEGMENTS/$F_SEGMENTS_COMPLETE" ]; then
		REASON=$(segments_starved "$ld")
	fi
	if [ -n "$REASON" ]; then
		status=failed
	elif [ -f "$ld/$F_CYCLICTEST_JSON" ] || [ -f "$ld/$F_SEGMENTS/$F_SEGMENTS_COMPLETE" ]; then
		if [ $STOP = 1 ]; then status=partial; else status=complete; fi
	elif [ $STOP = 1 ] && load_result "$ld"; then
		status=partial # stopped between or during segments: those done are kept
	else
		status=failed
		REASON="stopped before measuring"
	fi
	if [ -n "$REASON" ]; then
		emit "$E_LOAD_END" load="$name" status=$status reason="$REASON"
	else
		emit "$E_LOAD_END" load="$name" status=$status
	fi
	stream_result "$name"
	[ $status = complete ]
}

# Whether the load folder $1 (or a segment of it) holds a cyclictest result.
load_result() {
	for f in "$1/$F_CYCLICTEST_JSON" "$1/$F_SEGMENTS"/*/"$F_CYCLICTEST_JSON"; do
		[ -f "$f" ] && return 0
	done
	return 1
}

# What in the cyclictest JSON $1 took no sample, in the host's words ("thread 1 (CPU 1) measured
# no samples" for the first such thread, "no thread measured a sample"; with a second argument,
# as the host says it of a segment: "threads 0, 1 measured no samples"); nothing when each
# thread measured. Such a thread's CPU was never measured (a task above cyclictest's priority
# held it for the whole load), and the host fails the load for it, or sets the segment aside.
idle_threads() {
	tr -d ' \n\t' <"$1" | awk -v names="${2:-}" '
	{
		n = split($0, part, "\"histogram\":[{]")
		for (i = 2; i <= n; i++) {
			if (!match(part[i - 1], "\"[0-9]+\":[{]$")) continue
			name = substr(part[i - 1], RSTART + 1, RLENGTH - 4)
			threads++
			rest = substr(part[i], index(part[i], "}") + 1)
			fields = substr(rest, 1, index(rest, "}"))
			if (!match(fields, "\"cycles\":0[,}]")) continue
			cpu = "?"
			if (match(fields, "\"cpu\":[0-9]+")) cpu = substr(fields, RSTART + 6, RLENGTH - 6)
			if (!idle) first = name " (CPU " cpu ")"
			if (++idle <= 4) said = said (idle > 1 ? ", " : "") name
		}
	}
	END {
		if (!idle) exit
		if (!names && idle == threads) print "no thread measured a sample"
		else if (!names) print "thread " first " measured no samples" # the host stops at the first
		else print "thread" (idle > 1 ? "s " : " ") said (idle > 4 ? " and " (idle - 4) " more" : "") " measured no samples"
	}'
}

# Why no segment of the load folder $1 holds a whole result, in the host's words, when each of
# them has a thread that took no sample; nothing when one is whole.
segments_starved() {
	lost=
	count=0
	for f in "$1/$F_SEGMENTS"/*/"$F_CYCLICTEST_JSON"; do
		[ -f "$f" ] || continue
		idle=$(idle_threads "$f" names)
		[ -n "$idle" ] || return 0
		count=$((count + 1))
		seg=${f%/*}
		if [ $count -le 3 ]; then lost="$lost${lost:+; }${seg##*/}: $idle"; fi
	done
	[ $count -gt 0 ] || return 0
	if [ $count -gt 3 ]; then lost="$lost; and $((count - 3)) more"; fi
	echo "no segment left a whole result ($lost)"
}

# Whether any load of the run does.
any_result() {
	for d in "$DIR/$F_LOADS"/*; do
		load_result "$d" && return 0
	done
	return 1
}

# The StarFive study leaves a board idle a few minutes after boot before measuring: wait
# until the system has been up IDLE_AFTER_BOOT_S seconds.
idle_after_boot() {
	[ "${IDLE_AFTER_BOOT_S:-0}" -gt 0 ] 2>/dev/null || return 0
	up=$(now_s)
	emit "$E_BOOT_IDLE" up="$up" until="$IDLE_AFTER_BOOT_S" # said even when the system is up long enough
	while [ $STOP = 0 ] && [ "$(now_s)" -lt "$IDLE_AFTER_BOOT_S" ]; do nap 1; done
}

cmd_run() {
	[ $# -ge 1 ] || die "usage: agent.sh run DIR [options: rtlab.agent.contract]"
	DIR=$1
	shift
	run_options "$@"
	[ -f "$DIR/$F_PLAN_LOADS" ] || die "$DIR/$F_PLAN_LOADS is missing"
	EVENTS=$DIR/$F_EVENTS
	GOVSAVE=$DIR/$F_GOVERNORS_SAVED
	TRACESAVE=$DIR/$F_TRACEFS_SAVED
	trap on_signal INT TERM HUP
	trap cleanup EXIT
	if ! lock_take; then
		emit "$E_DONE" status=failed reason=another rtlab run is measuring on this system
		exit 1
	fi
	printf '%s %s\n' $$ "$(proc_start $$)" >"$DIR/$F_AGENT_PID"

	emit "$E_CLOCK" wall="$(date +%s)"
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
	done <"$DIR/$F_PLAN_LOADS"
	if [ $complete -gt 0 ] && [ $complete = "$ran" ] && [ $STOP = 0 ]; then
		status=complete
	elif any_result; then
		status=partial
	else
		status=failed
	fi
	# Everything put back and the lock free before `done`: the host reads `done` as the end of
	# the run (over SSH it stops listening there), and its next run on this system may start
	# at once; the EXIT trap, run again, finds nothing left to do.
	cleanup
	emit "$E_DONE" status="$status"
}

# Ends the run in DIR: its agent first (it stops in order), then any cyclictest or load
# group it left behind (an agent killed with SIGKILL cannot: SIGTERM, then SIGKILL after
# STOP_GRACE seconds), then the saved governors. Exit 1: DIR had no agent to tell (none had
# started there yet, or it had ended and put everything back).
cmd_stop() {
	[ $# -ge 1 ] || die "usage: agent.sh stop DIR"
	DIR=$1
	told=0
	if [ -f "$DIR/$F_AGENT_PID" ]; then
		told=1
		read -r pid start <"$DIR/$F_AGENT_PID"
		# Only the agent that wrote it: a PID reused since it died hard, or since the board
		# rebooted, is left alone (a start time that could not be read names it by its PID).
		if alive "$pid" && { [ -z "$start" ] || [ "$(proc_start "$pid")" = "$start" ]; }; then
			kill -TERM "$pid" 2>/dev/null
			wait_gone "$pid" 60
		fi
	fi
	left=
	lds=$DIR/$F_LOADS
	for f in "$lds"/*/"$F_CYCLICTEST_PID" "$lds"/*/"$F_SEGMENTS"/*/"$F_CYCLICTEST_PID" \
		"$lds"/*/"$F_TRACE"/*/"$F_CYCLICTEST_PID" "$lds"/*/"$F_TRACE"/*/"$F_RTLA_PID" "$lds"/*/"$F_LOAD_PID" \
		"$lds"/*/"$F_LOAD_PREPARE_PID" \
		"$lds"/*/*/"$F_PROBE_PID"; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		# the program its group is led by: the pid file's own tool, or the load's or probe's argv
		case ${f##*/} in
		"$F_LOAD_PID") tool=$(load_program "${f%/*}") ;;
		"$F_LOAD_PREPARE_PID") tool=$(sed -n 1p "${f%/*}/$F_LOAD_PREPARE_ARGV") ;;
		"$F_PROBE_PID") tool=$(sed -n 1p "${f%/*}/$F_PROBE_ARGV") ;;
		"$F_RTLA_PID") tool=rtla ;;
		*) tool=cyclictest ;;
		esac
		if [ "$tool" != "${tool%/*}" ] || [ "${#tool}" -gt 15 ]; then
			tool=${tool##*/}
			tool=$(printf %.15s "$tool") # the kernel keeps 15 characters of a name
		fi
		# Only a group still led by the tool this run started: a reused PID is left alone.
		if alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$tool" ]; then
			# cyclictest writes what it measured on SIGTERM; rtla puts its tracer back on SIGINT
			if [ "$tool" = rtla ]; then signal_group INT "$pid"; else signal_group TERM "$pid"; fi
			left="$left $pid"
		fi
	done
	stop_since=$(now_s) # STOP_GRACE seconds for them all, not each
	for pid in $left; do wait_gone "$pid" $((STOP_GRACE - ($(now_s) - stop_since))); done
	for pid in $left; do signal_group KILL "$pid"; done # and whatever ignored SIGTERM
	n=0
	for pid in $left; do
		while alive "$pid" && [ $n -lt 100 ]; do
			sleep "$FINE_NAP"
			n=$((n + 1))
		done
	done
	# and what a load left outside its group (its cgroup, or its mark)
	for ld in "$DIR/$F_LOADS"/*; do
		if [ -f "$ld/$F_LOAD_CGROUP" ] || [ -f "$ld/$F_LOAD_MARK" ]; then STOP_GRACE=0 load_sweep "$ld"; fi
	done
	# An agent that died hard left its saved governors behind: put them back.
	GOVSAVE=$DIR/$F_GOVERNORS_SAVED
	governors_restore
	TRACESAVE=$DIR/$F_TRACEFS_SAVED
	tracefs_restore
	[ $told = 1 ]
}

# The hwlat tracer: a kernel thread spins with interrupts off on one CPU at a time and records
# each gap in the time stamp counter longer than THRESHOLD_US: time taken by firmware (SMIs),
# the hypervisor or the hardware, which no tuning of Linux removes. It spins, so it holds the
# lock: it never runs during a measurement.
cmd_hwlat() {
	[ $# -ge 3 ] || die "usage: agent.sh hwlat DIR SECONDS THRESHOLD_US [CPUMASK]"
	DIR=$1
	# a folder of its own, never one that was there: the pass removes it as it ends, and the
	# target keeps nothing of it
	{ mkdir -p "${DIR%/*}" && mkdir "$DIR"; } || die "cannot make $DIR"
	trap on_signal INT TERM HUP
	trap cleanup EXIT
	# `agent.sh stop DIR` ends the pass as it ends a run (a board's command outlives the
	# connection a Ctrl-C on the host drops): known from the start
	printf '%s %s\n' $$ "$(proc_start $$)" >"$DIR/$F_AGENT_PID"
	tfs=$(tracefs_dir) || tfs=
	if [ -z "$tfs" ] || ! grep -q hwlat "$tfs/available_tracers" 2>/dev/null; then
		rm -rf "${DIR:?}"
		emit "$E_TRACE_END" spikes=0 reason=no hwlat tracer: a kernel with CONFIG_HWLAT_TRACER=y and tracefs mounted
		return 1
	fi
	if ! lock_take; then
		rm -rf "${DIR:?}"
		emit "$E_TRACE_END" spikes=0 reason=another rtlab run is measuring on this system
		return 1
	fi
	TRACESAVE=$DIR/$F_TRACEFS_SAVED
	# nothing changed yet when the save fails or a stop came while it saved: nothing will be,
	# nor put back (the EXIT trap restores what a save holds)
	if ! tracefs_save "$tfs" || ! cp "$TRACESAVE" "$DIR/$F_TRACEFS_BEFORE"; then
		rm -rf "${DIR:?}"
		emit "$E_TRACE_END" spikes=0 reason=tracefs could not be saved: nothing was changed
		return 1
	fi
	if [ "$STOP" = 1 ]; then
		rm -rf "${DIR:?}"
		return 1
	fi
	echo 0 >"$tfs/tracing_on"
	echo nop >"$tfs/current_tracer"
	: >"$tfs/trace"
	echo "$3" >"$tfs/tracing_thresh"
	if [ -n "${4:-}" ]; then echo "$4" >"$tfs/tracing_cpumask"; fi
	echo hwlat >"$tfs/current_tracer"
	# x86 guests have the hypervisor CPU flag; Xen and others name themselves in sysfs
	vm=no
	if grep -qw hypervisor "$ROOT/proc/cpuinfo" 2>/dev/null || [ -s "$ROOT/sys/hypervisor/type" ]; then vm=yes; fi
	emit "$E_TRACE_START" level=hwlat seconds="$2" threshold_us="$3" hypervisor=$vm
	echo 1 >"$tfs/tracing_on"
	pause "$2"
	echo 0 >"$tfs/tracing_on"
	cat "$tfs/trace" >"$DIR/$F_HWLAT_TRACE"
	tracefs_restore
	# stopped: tracefs is put back, and the host reads no more (a trace printed to no one
	# would block this shell until it is killed, its cleanup undone); nothing is kept
	if [ "$STOP" = 1 ]; then
		rm -rf "${DIR:?}"
		return 1
	fi
	tracefs_state "$tfs" >"$DIR/$F_TRACEFS_AFTER"
	emit "$E_TRACE_END" spikes="$(grep -c 'inner/outer' "$DIR/$F_HWLAT_TRACE")"
	for f in "$F_HWLAT_TRACE" "$F_TRACEFS_BEFORE" "$F_TRACEFS_AFTER"; do
		say "$E_HWLAT_FILE" name="$f"
		cat "$DIR/$f"
	done
	say "$E_HWLAT_END"
	# the host has the files: the target keeps nothing of the pass
	rm -rf "${DIR:?}"
}

cmd_file() {
	[ $# -ge 2 ] || die "usage: agent.sh file OP PATH [ARG] (put64 PATH BASE64 [PATH BASE64 ...])"
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
	# what the patterns (PATTERN ...) match: `F PATH` and its bytes in base64 on the lines
	# after, or `U PATH` for what is there but cannot be read (a folder too), as `read` reads
	# each; a planner's reads in one call
	dump)
		shift
		IFS=
		for pattern in "$@"; do
			for p in $ROOT$pattern; do
				[ -e "$p" ] || continue
				if [ ! -d "$p" ] && b=$(base64 "$p" 2>/dev/null); then
					printf 'F %s\n%s\n' "${p#"$ROOT"}" "$b"
				else
					printf 'U %s\n' "${p#"$ROOT"}"
				fi
			done
		done
		;;
	append64) mkdir -p "${path%/*}" && printf '%s' "$3" | base64 -d >>"$path" ;;
	# small files whole, as many as one call holds (PATH BASE64 ...): each written beside,
	# then renamed over its PATH; the first that fails ends the call, leaving no .part
	put64)
		shift
		[ $(($# % 2)) = 0 ] || die "put64 takes PATH BASE64 pairs"
		while [ $# -gt 0 ]; do
			path=$ROOT$1
			if ! { mkdir -p "${path%/*}" && printf '%s' "$2" | base64 -d >"$path$F_PART" &&
				mv -f "$path$F_PART" "$path"; }; then
				rm -f "$path$F_PART"
				echo "cannot write $1" >&2
				return 1
			fi
			shift 2
		done
		;;
	rename) mv -f "$path" "$ROOT$3" ;;
	remove) rm -f "$path" ;;
	mkdir) mkdir "$path" ;;
	rmdir) rmdir "$path" ;;
	*) die "unknown file operation $op" ;;
	esac
}

