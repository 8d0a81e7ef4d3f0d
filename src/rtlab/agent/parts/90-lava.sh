# --- LAVA (rtlab lava job) -------------------------------------------------------
# LAVA: each load's outcome as LAVA test cases, after the measurement (never during it: console
# output adds latency). lava-test-set and lava-test-case come with LAVA's test shell; outside
# one, the calls are printed.
# A run the lock refused (another run holds the board) measured nothing: a test case says so,
# and REFUSED (when given) gets the reason, naming who holds the board, for lava-test-raise.
cmd_lava_report() {
	[ $# -ge 1 ] || die "usage: agent.sh lava-report DIR [DEADLINE_US [REFUSED]]"
	DIR=$1
	deadline=${2:-0}
	holder=$(sed -n "s/^$EVENT_MARK $E_BUSY \\(t=[0-9.]* \\)\\{0,1\\}\\(.*\\)\$/\\2/p" "$DIR/$F_EVENTS" 2>/dev/null | first_line)
	if [ -n "$holder" ]; then
		lava_call lava-test-case board-busy --result fail
		why="rtlab: the board is busy, nothing was measured: another rtlab run holds its lock ($holder)"
		if [ -n "${3:-}" ]; then printf '%s\n' "$why" >"$3"; else echo "$why"; fi
	fi
	while read -r load; do
		[ -n "$load" ] || continue
		# the fields in the order emit writes them: a reason (free text, last) never matches
		status=$(sed -n "s/^$EVENT_MARK $E_LOAD_END t=[0-9.]* load=$load status=\([a-z-]*\)\( .*\)\{0,1\}$/\1/p" "$DIR/$F_EVENTS" 2>/dev/null | tail -n 1)
		lava_call lava-test-set start "$load"
		if [ "$status" = complete ]; then result=pass; else result=fail; fi
		lava_call lava-test-case "$load" --result "$result"
		# each other probe (--probe) a case of its own, as its probe-end says it ended: a
		# functional test that did not pass (pi_stress, rt-migrate-test) or a probe that left
		# nothing fails, as it does rtlab's run (the host reads its output again when the run
		# is imported, and may fail it there too: a damaged output, pi_stress with no inversion)
		probes=$(cat "$DIR/$F_PLAN_PROBES" 2>/dev/null)
		for probe in $probes; do
			[ -f "$DIR/$F_LOADS/$load/$probe/$F_PROBE_ARGV" ] || continue
			ended=$(sed -n "s/^$EVENT_MARK $E_PROBE_END t=[0-9.]* load=$load probe=$probe status=\([a-z-]*\)\( .*\)\{0,1\}$/\1/p" "$DIR/$F_EVENTS" 2>/dev/null | tail -n 1)
			if [ "$ended" = complete ]; then
				result=pass
			elif [ -z "$ended" ] && ! grep -q "^$EVENT_MARK $E_PROBE_START t=[0-9.]* load=$load probe=$probe " "$DIR/$F_EVENTS" 2>/dev/null; then
				result=skip # its load ended before its turn: the load's own case fails
			else
				result=fail
			fi
			lava_call lava-test-case "$load.$probe" --result "$result"
		done
		# per CPU: min, avg, max (with the deadline's verdict) and p99.99 from cyclictest's JSON,
		# the load's own or its segments' (a soak run) taken together; a failed load has none, as
		# in rtlab's report (its numbers cannot be vouched for)
		if [ "$status" != complete ] && [ "$status" != partial ]; then
			lava_call lava-test-set stop
			continue
		fi
		ld=$DIR/$F_LOADS/$load
		limit=$(sed -n "/^$CT_HISTOGRAM_FLAG\$/{n;p;}" "$ld/$F_CYCLICTEST_ARGV" 2>/dev/null | first_line)
		if [ -f "$ld/$F_CYCLICTEST_JSON" ]; then set -- "$ld/$F_CYCLICTEST_JSON"; else set -- "$ld/$F_SEGMENTS"/*/"$F_CYCLICTEST_JSON"; fi
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
	done <"$DIR/$F_PLAN_LOADS"
}

# cyclictest's JSON, one document a line with whitespace removed (several: a soak run's
# segments) -> per CPU: cpu min max avg p99.99 exact|lower, the segments' threads of a CPU
# taken together as rtlab does on the host (cycles and bins summed, avg weighted by cycles).
# p99.99 is the nearest-rank percentile of all cycles; cycles beyond the histogram overflowed.
# A thread without its numbers is left out; p99.99 is "-" without samples or a known range. A
# segment with a thread that took no sample is left out whole, as the host sets it aside.
lava_latencies() {
	awk -v limit="$1" '
	/"cycles":0[,}]/ { next }
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
