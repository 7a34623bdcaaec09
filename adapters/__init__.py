"""Wire-protocol adapters: one package per protocol, each a sans-IO projector plus endpoints."""
