"""The OpenAPI 3.1 description of the REST API, served at ``/api/v1/openapi.json``.

Tests check real responses against these schemas, and generate requests from them that the server must
take, so the document says what the server does: ``fields`` holds the request rules (taken from core's),
``components`` the schemas, ``document`` the operations.
"""

from kerrigan.web.api.openapi.document import document, routes

__all__ = ["document", "routes"]
