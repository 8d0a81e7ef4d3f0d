"""rtlab: measure, compare and explain the scheduling latency of real-time Linux."""

__version__ = "0.1.0"
