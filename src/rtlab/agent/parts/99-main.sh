# --- the command ---------------------------------------------------------------

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
sysinfo) cmd_sysinfo ;;
preflight) cmd_preflight "$@" ;;
run) cmd_run "$@" ;;
stop) cmd_stop "$@" ;;
hwlat) cmd_hwlat "$@" ;;
stressors) cmd_stressors "$@" ;;
lava-report) cmd_lava_report "$@" ;;
file) cmd_file "$@" ;;
*) die "usage: agent.sh sysinfo | preflight PRIO | run DIR [options] | stop DIR | hwlat DIR S US | stressors [CLASS...] | lava-report DIR [DEADLINE_US [REFUSED]] | file OP PATH [ARG ...]" ;;
esac
