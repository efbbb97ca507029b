"""The dispatcher and the runner protocol's server side."""
