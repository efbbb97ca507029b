"""The agent's hands on a device's board, as the devices file wires it (DESIGN.md, "Device control"):
its power (:mod:`~kerrigan.runner.boards.power`), its console (:mod:`~kerrigan.runner.boards.console`),
its boot (:mod:`~kerrigan.runner.boards.boot`), all of them around a job
(:mod:`~kerrigan.runner.boards.control`), the console's bytes on their way to the server
(:mod:`~kerrigan.runner.boards.console_log`), and what the job's command holds of its boards: a terminal on
each console and a socket for their power (:mod:`~kerrigan.runner.boards.access`)."""
