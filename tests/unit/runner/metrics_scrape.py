"""An agent's ``/metrics`` scraped over HTTP and parsed as Prometheus parses it."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """One scrape of an agent's ``/metrics``, parsed by the Prometheus client's own parser."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly these labels (KeyError when it is not exposed)."""
        return self.samples[(name, tuple(sorted(labels.items())))]

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


async def scrape(http: aiohttp.ClientSession, port: int | None) -> Scrape:
    """``GET http://127.0.0.1:<port>/metrics``, checked to be the text exposition, parsed."""
    assert port is not None, "the agent serves no metrics"
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        # The text exposition (a scraper asking for OpenMetrics by Accept gets that instead).
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return Scrape(samples)
