"""Recorded LoopEvent streams and every adapter's expected wire output for each."""
