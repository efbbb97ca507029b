"""``python -m kerrigan``: the ``kerrigan`` command."""

from kerrigan.cli import run

if __name__ == "__main__":
    run()
