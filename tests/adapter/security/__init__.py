"""The adapter under hostile callers: fuzzed input, slow clients, faults, bounded work, OpenAPI."""
