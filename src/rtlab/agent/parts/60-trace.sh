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
	rtla_state "$1"
}

# What rtla sets and puts back itself unless it is killed: the osnoise tracer's options, and
# an instance of its own with its tracer on (while a timerlat instance is on, no osnoise
# tracer can start). The instances there were: "instance TRACER NAME" lines.
rtla_state() {
	for f in "$1"/osnoise/*; do
		case ${f##*/} in options) continue ;; esac
		if [ -f "$f" ] && [ -r "$f" ]; then printf 'osnoise/%s %s\n' "${f##*/}" "$(cat "$f" 2>/dev/null)"; fi
	done
	for i in "$1"/instances/*; do
		if [ -d "$i" ]; then printf 'instance %s %s\n' "$(cat "$i/current_tracer" 2>/dev/null)" "${i##*/}"; fi
	done
}

# An rtla probe's save: what rtla changes, nothing of the top level it leaves alone.
rtla_save() {
	{ printf 'dir %s\n' "$1" && rtla_state "$1"; } >"$TRACESAVE$F_PART" && mv "$TRACESAVE$F_PART" "$TRACESAVE"
}

# Puts back the instances of tracefs $1 as the save found them: one that now runs rtla's
# tracers and did not is turned off, and removed if it is new.
instances_restore() {
	for i in "$1"/instances/*; do
		[ -d "$i" ] || continue
		tracer=$(cat "$i/current_tracer" 2>/dev/null)
		case $tracer in osnoise | timerlat) ;; *) continue ;; esac
		if grep -qxF -e "instance $tracer ${i##*/}" "$TRACESAVE"; then continue; fi
		echo 0 >"$i/tracing_on"
		echo nop >"$i/current_tracer"
		if ! sed -n 's/^instance [^ ]* //p' "$TRACESAVE" | grep -qxF -e "${i##*/}"; then rmdir "$i" 2>/dev/null; fi
	done
}

tracefs_save() {
	tracefs_state "$1" >"$TRACESAVE$F_PART" && mv "$TRACESAVE$F_PART" "$TRACESAVE"
}

tracefs_restore() {
	[ -n "$TRACESAVE" ] && [ -f "$TRACESAVE" ] || return 0
	t=$(sed -n 's/^dir //p' "$TRACESAVE")
	# an rtla probe's save holds its options and instances only: the top level is left as it is
	whole=
	if grep -q '^tracing_on ' "$TRACESAVE"; then whole=1; fi
	if [ -d "$t" ]; then
		instances_restore "$t" # first: an osnoise option cannot change under a running tracer
		if [ -n "$whole" ]; then
			echo 0 >"$t/tracing_on"
			: >"$t/set_event"
		fi
		while read -r f v; do
			case $f in
			event) echo "$v" >>"$t/set_event" ;;
			current_tracer | trace_clock | buffer_size_kb | osnoise/* | tracing_thresh | tracing_cpumask | hwlat_detector/*)
				echo "$v" >"$t/$f" 2>/dev/null
				;;
			esac
		done <"$TRACESAVE"
		if [ -n "$whole" ]; then
			: >"$t/trace"
			sed -n 's/^tracing_on //p' "$TRACESAVE" >"$t/tracing_on"
		fi
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
	done >"$2/$F_TRACE_EVENTS"
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

# Runs `rtla timerlat top --aa-only US` in folder $1 (its $F_RTLA_ARGV) for $2 seconds, in its
# own process group, watched like cyclictest: stopped with SIGINT (rtla then restores what it
# set) on a signal, killed GRACE_S seconds past its end. HIT is set to the uptime at which its
# output first said it hit the threshold (rtla itself looks once a second).
rtla_run() {
	rf=$1
	rtla_s=$2
	HIT=
	CT_STOP=INT
	# shellcheck disable=SC2086 # $NORMAL is "chrt -o 0" or nothing: split on purpose
	(cd "$rf" && run_argv "$F_RTLA_ARGV" $NORMAL $SETSID rtla) >"$rf/$F_RTLA_OUT" 2>&1 &
	CT_PID=$!
	echo "$CT_PID" >"$rf/$F_RTLA_PID"
	rstart=$(now_s)
	sent=
	while alive "$CT_PID"; do
		if [ -z "$HIT" ] && grep -q 'hit stop tracing' "$rf/$F_RTLA_OUT" 2>/dev/null; then
			read -r HIT _ </proc/uptime
		fi
		t=$(($(now_s) - rstart))
		if [ -z "$REASON" ] && [ -n "$STRESS_PID" ] && ! alive "$STRESS_PID"; then
			REASON="$LOAD_PROGRAM ended during the trace pass: $(last_words "$ld/$F_LOAD_LOG")"
		fi
		if [ -z "$sent" ] && { [ $STOP = 1 ] || [ -n "$REASON" ] || [ "$t" -ge $((rtla_s + GRACE_S)) ]; }; then
			signal_group INT "$CT_PID"
			sent=$t
		elif [ -n "$sent" ] && [ $((t - sent)) -ge $STOP_GRACE ]; then
			signal_group KILL "$CT_PID"
		fi
		nap "$FINE_NAP"
	done
	wait_pid "$CT_PID"
	CT_PID=
	CT_STOP=TERM
	say "$M_RTLA" exit="$WAIT_RC" >>"$rf/$F_RTLA_OUT"
	if [ -z "$HIT" ] && grep -q 'hit stop tracing' "$rf/$F_RTLA_OUT"; then read -r HIT _ </proc/uptime; fi
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
	td=$ld/$F_TRACE
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
		emit "$E_TRACE_START" load="$name" level=c seconds="$TRACE_S" threshold_us="$TRACE_US" clock=uptime asked="$TRACE_LEVEL"
		next_capture "$td"
		{ cat "$ld/$F_TRACE_ARGV"; printf '%s\n' "--spike=$TRACE_US" --spike-nodes=1000; ct_duration "$TRACE_S"; } >"$cf/$F_CYCLICTEST_ARGV"
		irq_sampler >"$cf/$F_INTERRUPTS" &
		sampler=$!
		measure "$cf" "$TRACE_S" "$ld/$F_LOAD_LOG"
		kill "$sampler" 2>/dev/null
		wait "$sampler" 2>/dev/null
		spikes=$(sed -n 's/^spikes = \([0-9]*\).*/\1/p' "$cf/$F_CYCLICTEST_OUT" 2>/dev/null | first_line)
	else
		tracefs_save "$tfs"
		cp "$TRACESAVE" "$td/$F_TRACEFS_BEFORE"
		if [ $level = b ]; then clock=$(tracefs_setup "$tfs" "$td"); else clock=uptime; fi
		emit "$E_TRACE_START" load="$name" level=$level seconds="$TRACE_S" threshold_us="$TRACE_US" clock="$clock" asked="$TRACE_LEVEL"
		while [ $STOP = 0 ] && [ -z "$REASON" ] && [ $spikes -lt "$TRACE_SPIKES" ]; do
			left=$((TRACE_S - ($(now_s) - pass_start)))
			[ $left -ge 1 ] || break
			next_capture "$td"
			if [ $level = a ]; then
				{ cat "$ld/$F_RTLA_ARGV"; printf '%s\n' --aa-only "$TRACE_US" -d "${left}s"; } >"$cf/$F_RTLA_ARGV"
				rtla_run "$cf" "$left"
				[ -n "$HIT" ] || break
				cpu=$(sed -n 's/^## CPU \([0-9]*\) hit stop tracing.*/\1/p' "$cf/$F_RTLA_OUT" | first_line)
				spikes=$((spikes + 1))
				emit "$E_TRACE_SPIKE" load="$name" n="$n" cpu="${cpu:-?}" hit="$HIT"
				continue
			fi
			{ cat "$ld/$F_TRACE_ARGV"; printf '%s\n' -b "$TRACE_US" --tracemark; ct_duration "$left"; } >"$cf/$F_CYCLICTEST_ARGV"
			: >"$tfs/trace"
			echo 1 >"$tfs/tracing_on"
			measure "$cf" "$left" "$ld/$F_LOAD_LOG"
			echo 0 >"$tfs/tracing_on"
			grep -q '^# Break thread' "$cf/$F_CYCLICTEST_OUT" 2>/dev/null || break
			cpu=$(sed -n 's/.*\[0*\([0-9][0-9]*\)\].*tracing_mark_write: hit latency.*/\1/p' "$tfs/trace" | first_line)
			if [ -n "$cpu" ] && [ -r "$tfs/per_cpu/cpu$cpu/trace" ]; then
				if command -v gzip >/dev/null 2>&1; then
					gzip -c "$tfs/per_cpu/cpu$cpu/trace" >"$cf/cpu$cpu$F_CPU_TRACE.gz"
				else
					cat "$tfs/per_cpu/cpu$cpu/trace" >"$cf/cpu$cpu$F_CPU_TRACE"
				fi
			fi
			spikes=$((spikes + 1))
			emit "$E_TRACE_SPIKE" load="$name" n="$n" cpu="${cpu:-?}"
		done
		tracefs_restore
		tracefs_state "$tfs" >"$td/$F_TRACEFS_AFTER"
	fi
	if [ -n "$REASON" ]; then
		emit "$E_TRACE_END" load="$name" spikes="${spikes:-0}" reason="$REASON"
	else
		emit "$E_TRACE_END" load="$name" spikes="${spikes:-0}"
	fi
	REASON=$saved_reason
}

# The load folder as a gzipped tar in base64, for targets that cannot fetch files later.
stream_result() {
	[ $STREAM_RESULTS = 1 ] || return 0
	say "$E_RESULT" load="$1"
	(cd "$DIR" && tar -cf - "$F_LOADS/$1" 2>/dev/null | gzip | base64)
	say "$E_RESULT_END" load="$1"
}

# Ends what is still running, and waits for it: nothing outlives the agent.
cleanup() {
	if [ -n "$CT_PID" ]; then
		signal_group KILL "$CT_PID"
		wait "$CT_PID" 2>/dev/null
		CT_PID= # cleanup runs twice at a run's end: never a reused pid's group the second time
	fi
	if [ -n "$STRESS_PID" ]; then
		signal_group KILL "$STRESS_PID"
		wait "$STRESS_PID" 2>/dev/null
		STRESS_PID=
		STOP_GRACE=0 load_sweep "$LOAD_DIR"
	fi
	governors_restore
	tracefs_restore
	if [ -n "${DIR:-}" ]; then rm -f "$DIR/$F_AGENT_PID"; fi
	lock_release
}

