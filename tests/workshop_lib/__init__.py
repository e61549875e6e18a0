"""Tests of the client-side library (workshop_lib): AWS flows, builds, IAM, client, evaluation, CLI."""
