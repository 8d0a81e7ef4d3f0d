"""Many runs as one campaign: the resumable loop (loop.py) and what it drives: the stressor
scan (scan.py), a study file's stages (study.py), the always-on monitor (monitor.py)."""
