"""Where runs' events come from: the reference loop, external loops (ingest), recordings."""
