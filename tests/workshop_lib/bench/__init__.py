"""workshop_lib.bench: tasks, scoring, calibration, reports, and an end-to-end run."""
