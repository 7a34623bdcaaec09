"""A start's ``webhook`` (the URL told of the run's end, gateway/run_webhooks.py), checked
before anything starts: a URL the operator does not allow is refused, never fetched."""

from __future__ import annotations

from ...contracts.client_errors import ClientError
from ...contracts.limits import EndpointLimits

# Longer is not a URL anyone means; it would be kept with the run's record.
MAX_WEBHOOK_CHARS = 2_048


def check_webhook(url: str | None, limits: EndpointLimits) -> None:
    """ClientError (field ``webhook``) naming why the gateway will not send ``url`` the run's
    end: no outbox here (stdio), too long, not http(s), or a host not allowed."""
    if url is None:
        return
    if limits.outbox is None:
        why = "this endpoint sends no webhooks (a gateway's HTTP endpoints do)"
    elif len(url) > MAX_WEBHOOK_CHARS:
        why = f"at most {MAX_WEBHOOK_CHARS} characters"
    else:
        refusal = limits.client_outbound.webhook_refusal(url)
        if refusal is None:
            return
        why = refusal
    raise ClientError(f"webhook: {why}", field="webhook")
