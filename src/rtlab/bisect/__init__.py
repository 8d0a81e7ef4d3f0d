"""Which change made latency worse: rtlab bisect (a commit of a git range) and rtlab sweep
(a kernel option), every step decided by compare's verdicts, never by a fixed threshold.

    measured    subjects (revisions, configurations) measured as whole runs in folders of
                their own; the user's prepare command
    search      pure: a standing from the verdicts against both ends, the next revision
    judge       decisions that measure: the ends, a subject's place, a culprit's confirmation
    revisions   the git range and rtlab's worktree        drive    bisect's resumable loop
    variants    configurations as Kconfig fragments        sweep    effects; the option to blame
    builds      rtlab's kernel build as a subject's preparation
"""
