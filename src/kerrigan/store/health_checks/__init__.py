"""Health checks: queued (:mod:`.queueing`) and their ends recorded (:mod:`.ends`), what makes a device
``good`` or ``bad`` by its own check."""
