"""The API's description: ``/openapi.json`` (OpenAPI 3.1, from the adapters that describe their
routes and the gateway's own) and ``/docs``, a page that shows it from the package alone."""
