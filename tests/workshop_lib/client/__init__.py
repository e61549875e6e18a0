"""workshop_lib.client, decisions and systemone: the caller's side of an endpoint."""
