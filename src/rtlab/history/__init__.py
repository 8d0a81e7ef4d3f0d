"""History: an index over run folders, to follow a board's latency across kernels.

The run folders stay the source of truth; the store (SQLite by default, a lab's PostgreSQL
through the same code) holds what trends and regressions need and can always be rebuilt
from the folders. schema.py holds its tables, index.py what one run becomes in them (pure),
db.py the reads and writes (address.py where the store is and its address as shown, folders.py
the run folders under a path), trend.py and changes.py the answers, gate.py what the
commands and the monitor ask of them (one family for a gate's comparisons).
"""
