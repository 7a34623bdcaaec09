"""The web console: static pages at ``/`` that drive runs over AG-UI and watch them over native
SSE (docs/console.md). Nothing is built at run time: ``static/`` is served as it is."""
