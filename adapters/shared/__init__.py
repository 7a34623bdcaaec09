"""HTTP plumbing every adapter shares: problem bodies, bounded body reads, event streams."""
