"""loopgate's server side: the reference loop, the hub, the journal and the Starlette app."""
