"""Who is calling (docs/auth.md): the credential sources an operator configures, the middleware
that resolves one principal per request, quotas per principal and tenant, and the audit log."""
