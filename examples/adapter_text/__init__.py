"""A worked example of a loopgate protocol adapter: a run as a plain-text transcript.

    GET /text/runs/{run_id}   ->   text/plain, one record per line, streamed as the run goes

docs/architecture.md ("Adding a protocol") walks through it; copy it into your own package and
register it in the ``loopgate.adapters`` entry-point group.
"""

from examples.adapter_text.adapter import ADAPTER, TextAdapter
from examples.adapter_text.projector import TextProjector

__all__ = ["ADAPTER", "TextAdapter", "TextProjector"]
