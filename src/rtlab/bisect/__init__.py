"""rtlab bisect: which change of a git tree made latency worse, found by compare's verdicts.

revisions   the range in order, a worktree of rtlab's own, the user's prepare command
search      pure: a revision's standing from its verdicts against both ends, the next one
            to measure, and the conclusion (a culprit, no difference, or cannot tell)
drive       the resumable loop: prepare, measure, judge, next; the folder is the record
"""
