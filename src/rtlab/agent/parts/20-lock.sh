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
			emit "$E_BUSY" pid="${1:-?}" run="${2##*/}"
			return 1
		fi
		mv "$lock" "$lock.stale.$$" 2>/dev/null && rm -rf "$lock.stale.$$"
		tries=$((tries + 1))
	done
	printf '%s %s %s\n' "$$" "$(proc_start $$)" "$DIR" >"$lock/owner$F_PART" &&
		mv "$lock/owner$F_PART" "$lock/owner"
	LOCK=$lock
}

lock_release() {
	[ -n "$LOCK" ] || return 0
	rm -rf "$LOCK"
	LOCK=
}

