"""Suite-wide test settings."""

from hypothesis import settings

# Property tests draw the same examples on every run, so a red CI run is the code's doing, not
# a lucky draw; `pytest --hypothesis-profile=explore` looks for new failures with fresh ones.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile("deterministic")
