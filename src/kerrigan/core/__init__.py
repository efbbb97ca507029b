"""The pure core: labels, inventory, manifests, matching, diagnostics and selection.

Nothing here performs I/O or reads the clock; callers pass in text, snapshots and times.
"""
