# --- governors -------------------------------------------------------------

governors_set() {
	want=$1
	if [ "$want" = keep ]; then
		emit "$E_GOVERNOR" status=kept
		return 0
	fi
	: >"$GOVSAVE$F_PART"
	for f in "$ROOT"/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
		[ -f "$f" ] || continue
		printf '%s %s\n' "$(cat "$f")" "$f" >>"$GOVSAVE$F_PART"
	done
	if [ ! -s "$GOVSAVE$F_PART" ]; then
		rm -f "$GOVSAVE$F_PART"
		emit "$E_GOVERNOR" status=unavailable
		return 0
	fi
	# Saved before anything changes, so a crash can always be undone.
	mv "$GOVSAVE$F_PART" "$GOVSAVE"
	status='set'
	while read -r _old path; do
		printf '%s\n' "$want" >"$path" 2>/dev/null || status=failed
	done <"$GOVSAVE"
	emit "$E_GOVERNOR" status=$status
}

governors_restore() {
	[ -n "$GOVSAVE" ] && [ -f "$GOVSAVE" ] || return 0
	while read -r old path; do
		printf '%s\n' "$old" >"$path" 2>/dev/null
	done <"$GOVSAVE"
	rm -f "$GOVSAVE"
}

