"""The limits on the files a job's runner sends after the command: JUnit results and uploaded artifacts.

One place for both sides of the runner protocol: the agent sends within them (it declares an upload over
:data:`UPLOAD_MAX_BYTES` rather than send it), and the server refuses what passes them.
"""

from __future__ import annotations

from typing import Final

RESULTS_MAX_FILES: Final = 20  # results files a job keeps
RESULTS_MAX_BYTES: Final = 16 << 20  # of each, the first bytes sent and parsed
UPLOAD_MAX_FILES: Final = 100  # uploaded files a job keeps
UPLOAD_MAX_BYTES: Final = 100 << 20  # one uploaded file
UPLOAD_MAX_JOB_BYTES: Final = 1 << 30  # every uploaded file of a job together
