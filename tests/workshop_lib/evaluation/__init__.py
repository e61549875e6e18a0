"""workshop_lib.evaluation: tasks, scoring, temperature scaling, reports, and an end-to-end run."""
