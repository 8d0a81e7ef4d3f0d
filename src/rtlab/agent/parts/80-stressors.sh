# --- stressors (rtlab scan) ---------------------------------------------------

# stress-ng's stressors on this system: all of them, then those of each CLASS asked for.
cmd_stressors() {
	if ! command -v stress-ng >/dev/null 2>&1; then
		say "$E_MISSING" name=stress-ng
		return 1
	fi
	say "$E_STRESSORS" class=all names="$(stress-ng --stressors 2>/dev/null | tr -s ' \n' ',,' | sed 's/^,//; s/,$//')"
	for class in "$@"; do
		line=$(stress-ng --class "$class?" 2>&1 | sed -n 's/^class .* stressors: *//p')
		if [ -n "$line" ]; then
			say "$E_STRESSORS" class="$class" names="$(printf '%s' "$line" | tr -s ' ' ',')"
		else
			say "$E_STRESSORS" class="$class" names=
		fi
	done
}

