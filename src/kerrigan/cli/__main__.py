"""``python -m kerrigan.cli``: the ``kerrigan`` command (``kerrigan serve`` starts its workers this way)."""

from kerrigan.cli import run

if __name__ == "__main__":
    run()
