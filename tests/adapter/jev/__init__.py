"""The adapter's Jev System One API: schema, readouts, HTTP, and the outside conformance suite."""
