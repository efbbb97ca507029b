"""The completed ``build-firmware`` workflow run of ``fixtures/webhooks``: the end-to-end tests whose jobs
take its ``firmware-image`` artifact deliver it, and have the stand-in hold the artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
RUN: Final[dict[str, Any]] = json.loads(
    (ROOT / "fixtures/webhooks/workflow_run-completed.json").read_text(encoding="utf-8")
)
RUN_ID: Final = int(RUN["workflow_run"]["id"])
SHA: Final = str(RUN["workflow_run"]["head_sha"])
