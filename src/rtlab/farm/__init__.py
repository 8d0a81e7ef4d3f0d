"""Board farms: a plan as one LAVA job and its log read back into a run (lava.py), the
LAVA server's REST API (server.py)."""
