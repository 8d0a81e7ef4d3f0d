"""Results where farms read them: one module per engine (kcidb, ...), each a pure function
from summaries to the engine's own document; the command line writes or sends it."""
