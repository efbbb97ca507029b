"""The web adapter: the REST API (and, later, the HTML pages and sign-in)."""
