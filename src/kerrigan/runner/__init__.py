"""The runner agent that runs on a runner host."""
