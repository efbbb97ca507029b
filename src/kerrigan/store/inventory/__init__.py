"""Repository functions for pools, devices and runner hosts. They take and return core objects.

Every write goes through :func:`save_pool` / :func:`save_device` (or the create and delete functions), which
compare the stored object with the new one field by field and write one audit row per changed field. Each
pool and device carries a version: a write can demand the version it read (``If-Match``) and is refused when
someone wrote in between. Without that, writes to one row are serialised (the row is locked where the
database can) and the later one wins.
"""

from kerrigan.store.inventory.reads import (
    get_device,
    get_pool,
    host_devices,
    list_devices,
    list_pools,
    pool_owners,
)
from kerrigan.store.inventory.rows import (
    ConflictError,
    NotFoundError,
    StaleError,
    StoredDevice,
    StoredPool,
    check_etag,
)
from kerrigan.store.inventory.snapshot import load_inventory
from kerrigan.store.inventory.writes import (
    apply_diff,
    create_device,
    create_pool,
    delete_device,
    delete_pool,
    end_due_maintenance,
    save_device,
    save_pool,
    set_state,
)

__all__ = [
    "ConflictError",
    "NotFoundError",
    "StaleError",
    "StoredDevice",
    "StoredPool",
    "apply_diff",
    "check_etag",
    "create_device",
    "create_pool",
    "delete_device",
    "delete_pool",
    "end_due_maintenance",
    "get_device",
    "get_pool",
    "host_devices",
    "list_devices",
    "list_pools",
    "load_inventory",
    "pool_owners",
    "save_device",
    "save_pool",
    "set_state",
]
