# --- JSON output -----------------------------------------------------------

# awk's js(S): S escaped for a JSON string: \ and " escaped, tabs and line breaks made spaces,
# the other control characters dropped. One awk for a whole object, not a pipeline per value:
# under emulation or on a slow board each process costs milliseconds, and sysinfo writes
# hundreds. Run as LC_ALL=C awk: byte by byte, as sed and tr were, so bytes that are not
# UTF-8 pass through unchanged and gawk says nothing of them on stderr (which the host reads
# with the document).
JSON_AWK='
function js(s) {
	gsub(/[\\"]/, "\\\\&", s)
	gsub(/[\t\r\n]/, " ", s)
	gsub("[" CONTROL "]", "", s)
	return s
}
BEGIN {
	CONTROL = ""
	for (i = 1; i < 32; i++) if (i != 9 && i != 10 && i != 13) CONTROL = CONTROL sprintf("%c", i)
}'

# $1 as a JSON string (its lines joined by spaces). What needs no escaping (versions, paths,
# numbers: most of what sysinfo writes) is printed by the shell itself: awk is a process, and
# an emulated arm64 guest took 4 s for sysinfo's hundred of them.
json_str() {
	case $1 in
	*[!A-Za-z0-9\ ._,:/=+@%-]*) ;;
	*)
		printf '"%s"' "$1"
		return 0
		;;
	esac
	printf '%s' "$1" | LC_ALL=C awk "$JSON_AWK"'
		BEGIN { printf "\"" }
		{ printf "%s%s", (NR > 1 ? " " : ""), js($0) }
		END { printf "\"" }'
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

# Where the kernel's config is read from (CONFIG_SOURCE), or what is missing. Read in this
# shell, not in a pipeline's, so that both stay set; the config itself is streamed, never
# copied to a file that an interrupted agent would leave behind.
config_source() {
	release=$(uname -r)
	CONFIG_SOURCE=
	if [ -r "$ROOT/proc/config.gz" ]; then
		CONFIG_SOURCE=/proc/config.gz
	elif [ -r "$ROOT/boot/config-$release" ]; then
		CONFIG_SOURCE=/boot/config-$release
	else
		MISSING="$MISSING /proc/config.gz /boot/config-$release"
	fi
}

config_text() {
	case $CONFIG_SOURCE in
	/proc/config.gz) gzip -dc "$ROOT/proc/config.gz" 2>/dev/null ;;
	?*) cat "$ROOT$CONFIG_SOURCE" ;;
	esac
}

config_json() {
	config_source
	printf '{"source": '
	if [ -n "$CONFIG_SOURCE" ]; then json_str "$CONFIG_SOURCE"; else printf null; fi
	printf ', "options": {'
	# KEY=VALUE (VALUE unquoted), "# KEY is not set" as KEY=n
	config_text | LC_ALL=C grep -a -E "$CONFIG_RE" | LC_ALL=C awk "$JSON_AWK"'
		{
			line = $0
			if (line ~ /^# CONFIG_[A-Z0-9_]* is not set$/) {
				sub(/^# /, "", line)
				sub(/ is not set$/, "=n", line)
			}
			eq = index(line, "=")
			key = eq ? substr(line, 1, eq - 1) : line
			value = eq ? substr(line, eq + 1) : ""
			sub(/^"/, "", value)
			sub(/"$/, "", value)
			printf "%s\"%s\": \"%s\"", sep, js(key), js(value)
			sep = ", "
		}'
	printf '}}'
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
		# SMT: the CPUs of this one's core (rtlab's placement warning)
		if [ -r "$d/topology/thread_siblings_list" ]; then
			printf '%s"siblings": %s' "$inner" "$(json_str "$(cat "$d/topology/thread_siblings_list")")"
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

# What rteval's report says of the machine beside the kernel: firmware (DMI), the clock
# source, the load average as measuring begins, the tuned profile and whether it verifies,
# and whether the agent runs in a container (its numbers are then the container's host's).
platform_json() {
	printf '{"dmi": {'
	sep=
	for f in sys_vendor product_name board_name bios_vendor bios_version bios_date; do
		printf '%s"%s": ' "$sep" "$f"
		if [ -r "$ROOT/sys/class/dmi/id/$f" ]; then json_str "$(cat "$ROOT/sys/class/dmi/id/$f" 2>/dev/null)"; else printf null; fi
		sep=', '
	done
	printf '}, "clocksource": '
	json_file /sys/devices/system/clocksource/clocksource0/current_clocksource
	printf ', "load_average": '
	json_file /proc/loadavg
	printf ', "tuned_profile": '
	if [ -r "$ROOT/etc/tuned/active_profile" ]; then json_str "$(cat "$ROOT/etc/tuned/active_profile")"; else printf null; fi
	printf ', "tuned_verifies": '
	if [ -z "$ROOT" ] && [ -r /etc/tuned/active_profile ] && command -v tuned-adm >/dev/null 2>&1; then
		if tuned-adm verify >/dev/null 2>&1; then printf true; else printf false; fi
	else
		printf null
	fi
	printf ', "container": '
	json_str "$(container_kind)"
	printf ', "boot_methods": '
	json_str "$(boot_methods)"
	printf '}'
}

# How a kernel can be booted here with a way back (rtlab boot, rtlab check), one word each:
# kexec (the default boot untouched), GRUB's environment block (next_entry), extlinux or
# syslinux (--once), systemd-boot (one-shot entries).
boot_methods() {
	found=
	if command -v kexec >/dev/null 2>&1; then found=kexec; fi
	if [ -f "$ROOT/boot/grub/grubenv" ]; then found="$found grubenv"; fi
	for f in /boot/extlinux/extlinux.conf /extlinux/extlinux.conf /boot/syslinux/syslinux.cfg; do
		if [ -f "$ROOT$f" ]; then found="$found extlinux:$f"; fi
	done
	if command -v bootctl >/dev/null 2>&1 && bootctl is-installed >/dev/null 2>&1; then found="$found systemd-boot"; fi
	echo "${found# }"
}

# docker, podman, lxc, another name a container manager gives, or "none"
container_kind() {
	if [ -e "$ROOT/.dockerenv" ]; then echo docker; return 0; fi
	if [ -e "$ROOT/run/.containerenv" ]; then echo podman; return 0; fi
	said=
	# (a failed redirection is the shell's own message on its stderr: the file is tested first)
	if [ -r "$ROOT/proc/1/environ" ]; then
		said=$(tr '\000' '\n' <"$ROOT/proc/1/environ" | sed -n 's/^container=//p' | first_line)
	fi
	if [ -n "$said" ]; then echo "$said"; return 0; fi
	echo none
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
	printf ', "platform": '
	platform_json
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

