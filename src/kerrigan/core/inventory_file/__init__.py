"""The inventory file: pools, their devices and runner hosts as YAML (see docs/inventory.md).

Reading a file a person wrote, with every problem placed by file, line and field, is
:mod:`~kerrigan.core.inventory_file.reading`; writing an inventory back in the same shape (an export, the
stored base of an import) and reading that back is :mod:`~kerrigan.core.inventory_file.writing`.
"""

from __future__ import annotations

from kerrigan.core.inventory_file.reading import InventoryResult, parse_inventory
from kerrigan.core.inventory_file.writing import DocumentError, inventory_document, inventory_from_document

__all__ = [
    "DocumentError",
    "InventoryResult",
    "inventory_document",
    "inventory_from_document",
    "parse_inventory",
]
