"""What defines a run before it exists: its spec, the checks made before it trains, the size limits."""
