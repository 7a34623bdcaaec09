"""The reference CoreLoop: model → deltas → tools → observations → next round."""
