"""A session's pages: ``/sessions/{id}`` (:mod:`.handlers`), its resolution task by task
(:mod:`.resolution_views`, which the explain page shares), its jobs (:mod:`.job_views`), and each job's output
a page at a time, whole, and streamed (:mod:`.output`)."""

from __future__ import annotations

from aiohttp import web

from kerrigan.web.pages.sessions import handlers, output

routes: list[web.AbstractRouteDef] = [*handlers.routes, *output.routes]
