#!/bin/sh
# rtlab agent: the only code that runs on the measured system.
#
# It must work under busybox ash and dash (boards have no Python, no bash), so it
# uses POSIX sh and the commands busybox provides. The host prepares a run folder
# (the plan as plain files) and reads back what the agent writes there.
#
#   agent.sh sysinfo              prints system information as JSON
#   agent.sh preflight PRIO RUNS|- [PROGRAM...]
#                                 checks cyclictest and the loads' programs, SCHED_FIFO+mlock,
#                                 another active run (the lock) and, in RUNS, the free space
#   agent.sh run DIR [OPTIONS]    measures the plan in DIR; its options and their defaults are
#                                 generated from rtlab.agent.contract (after the constants)
#   agent.sh stop DIR             ends a run (its pid is in DIR/agent.pid) and anything it left
#   agent.sh hwlat DIR SECONDS THRESHOLD_US [CPUMASK]
#                                 the hwlat tracer alone (never during a measurement: it holds
#                                 the lock) on the CPUs of CPUMASK (hex); prints its trace between
#                                 "@rtlab hwlat-trace" and "@rtlab hwlat-end", tracefs restored
#   agent.sh stressors [CLASS...] stress-ng's stressors (all, then each CLASS's) for rtlab scan
#   agent.sh file OP PATH [ARG]   reads and writes /proc, /sys and rtlab's state for tuning:
#                                 read, write VALUE, glob, exists, append64 BASE64, put64
#                                 BASE64 [PATH BASE64 ...] (whole files), rename TO, remove,
#                                 mkdir, rmdir (every PATH under RTLAB_ROOT)
#
# One run measures at a time on a system: `run` holds the lock $RTLAB_TARGET_DIR/lock (a
# folder made with mkdir, atomic everywhere; its `owner` file says "PID START DIR"). A lock
# whose owner is gone, or whose PID now belongs to a process started at another time, is stale.
#
# The run folder DIR: its files (the plan the host writes, what `run` writes) are the table in
# rtlab.rundir.layout, each with its shape and meaning; the agent spells them as the generated
# $F_<NAME> variables (and event kinds as $E_<KIND>), never by hand.
#
# Progress lines (stdout and DIR/events):
#   @rtlab clock t=UPTIME wall=EPOCH_SECONDS          (once, first: ties uptime to the wall clock)
#   @rtlab boot-idle t=UPTIME up=S until=S              (--idle-after-boot: waiting)
#   @rtlab governor t=UPTIME status=set|unavailable|kept|failed
#   @rtlab load-start t=UPTIME load=L seconds=S         (then the load settles)
#   @rtlab measure-start t=UPTIME load=L                (cyclictest starts)
#   @rtlab segment-start t=UPTIME load=L n=N seconds=S  (--segment: each cyclictest run of a load)
#   @rtlab segment-end t=UPTIME load=L n=N status=complete|failed
#   @rtlab measure-end t=UPTIME load=L                  (cyclictest ended; the load is stopped next)
#   @rtlab probe-start t=UPTIME load=L probe=P seconds=S (--probe: the next probe, same load)
#   @rtlab probe-end t=UPTIME load=L probe=P status=complete|partial|failed [reason=TEXT]
#   @rtlab trace-start t=UPTIME load=L level=a|b|c seconds=S threshold_us=US clock=C asked=LEVEL
#   @rtlab trace-spike t=UPTIME load=L n=N cpu=C [hit=UPTIME]  (levels a, b: a capture)
#   @rtlab trace-end t=UPTIME load=L spikes=N [reason=TEXT]
#   @rtlab load-end t=UPTIME load=L status=complete|partial|failed [reason=TEXT]
#   @rtlab done t=UPTIME status=complete|partial|failed [reason=TEXT]
# and on stdout only, with --stream-results (targets that cannot copy files back later):
#   @rtlab result load=L, base64 lines of loads/L as a gzipped tar, @rtlab result-end load=L
#
# A measurement never outlives its plan: cyclictest that has not ended GRACE_S seconds
# (default 30) after its planned end, or that ignores SIGTERM for STOP_GRACE seconds, is
# killed with its process group; so is a load that ignores SIGTERM. An rtla probe is given
# RTLA_START seconds more and stopped with SIGINT, its own stop, before it is killed. A load
# whose process ends before cyclictest does is stopped at once and failed: it measured no load.
# The agent and cyclictest are never the OOM killer's victims (oom_score_adj -1000); the
# load's processes are (0, and stress-ng makes its own workers the first to go).

set -u
# The facts the agent shares with rtlab's Python (defaults, the files and kernel options it
# records) are not written here: they are generated from the Python that owns them into
# the constants part (rtlab.agent.constants) when the agent is assembled.
# A host that went away must not take the measurement with it.
trap '' PIPE

# Every /proc and /sys path goes through ROOT so tests can use a fake tree.
ROOT=${RTLAB_ROOT:-}
EVENTS=
STOP=0
GOT_SIGNAL=0
CT_PID=
# the signal on which the watched tool stops and keeps what it has: cyclictest writes its JSON
# on SIGTERM; rtla dies of it with its tracer still on, and stops so on SIGINT
CT_STOP=TERM
SLEEP_PID=
STRESS_PID=
LOAD_DIR=
GOVSAVE=
LOCK=
TRACESAVE=

die() {
	printf 'rtlab agent: %s\n' "$*" >&2
	exit 2
}

