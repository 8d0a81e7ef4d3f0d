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

