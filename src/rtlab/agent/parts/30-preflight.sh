# --- preflight -------------------------------------------------------------

# The commands the agent and rtlab's targets run on a board besides the shell's built-ins:
# all of them busybox applets (docs/boards.md, "What a board must have", lists them with their
# options).
AGENT_NEEDS="awk base64 cat cp cut date df env grep gzip kill mkdir mktemp mv rm sed sleep stat tail tar tr uname wc"

cmd_preflight() {
	prio=${1:-99}
	runs=${2:--}
	[ "$runs" != - ] || runs=
	shift 2 2>/dev/null || shift $#
	ok=0
	for program in $AGENT_NEEDS; do
		if ! command -v "$program" >/dev/null 2>&1; then
			say "$E_MISSING" name="$program" need=agent
			ok=1
		fi
	done
	[ $ok = 0 ] || return 1
	holder=$(lock_holder)
	if [ -n "$holder" ]; then
		# shellcheck disable=SC2086 # "PID DIR" split into its two words on purpose
		set -- $holder
		say "$E_BUSY" run="${2##*/}" pid="$1"
		return 1
	fi
	if [ -n "$runs" ]; then
		mkdir -p "$runs" 2>/dev/null
		say "$E_SPACE" kb="$(df -k "$runs" 2>/dev/null | awk 'NR == 2 { print $4 }')"
	fi
	if command -v cyclictest >/dev/null 2>&1; then
		say "$E_TOOL" name=cyclictest version="$(tool_version cyclictest)"
	else
		say "$E_MISSING" name=cyclictest
		ok=1
	fi
	for program in "$@"; do
		# a probe's kernel tracer (--probe timerlat, osnoise): NAME-tracer
		# and a file of tracefs it needs besides (a newer kernel's): tracefs:PATH
		case $program in
		*-tracer)
			grep -qw "${program%-tracer}" "$(tracefs_dir)/available_tracers" 2>/dev/null ||
				{ say "$E_MISSING" name="$program"; ok=1; }
			continue
			;;
		tracefs:*)
			[ -e "$(tracefs_dir)/${program#tracefs:}" ] || { say "$E_MISSING" name="$program"; ok=1; }
			continue
			;;
		esac
		if command -v "$program" >/dev/null 2>&1; then
			say "$E_TOOL" name="$program" version="$(tool_version "$program")"
		else
			say "$E_MISSING" name="$program"
			ok=1
		fi
		# oslat reads a cycle counter it knows on a few architectures only; elsewhere (riscv64)
		# every call prints why and exits 0, having measured nothing
		if [ "$program" = oslat ] && said=$(oslat --version 2>&1 | first_line) &&
			case $said in *"not yet supported"*) true ;; *) false ;; esac; then
			say "$E_UNSUPPORTED" name=oslat arch="$(uname -m)" reason="$said"
			ok=1
		fi
	done
	[ $ok = 0 ] || return 1
	# Two loops are enough to learn whether SCHED_FIFO and mlockall are allowed.
	if out=$(cyclictest -m -p "$prio" -i 1000 -l 2 -q 2>&1); then
		say "$E_PRIVILEGES" status=ok
	else
		say "$E_PRIVILEGES" status=denied reason="$(printf '%s' "$out" | tr '\n' ' ')"
		return 1
	fi
}

