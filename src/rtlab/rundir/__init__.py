"""The run folder: what a run leaves on disk, and reading it back.

layout.py is the table of its files and events.py the agent's event lines (the agent's names
are generated from both); disk.py reads and writes its files (RunDir, atomic writes);
cyclictest.py, timeline.py, ftrace.py and stressng.py read the tools' raw output;
liveness.py says whether a run still goes; readback.py reads a saved run back into its summary.
"""
