"""Named points inside long writes where tests stop or fail a process on purpose.

Crash-safety claims are only worth the crashes they were tested against. Each write
path calls `reach("name")` at its interesting boundaries; normally that does nothing.
With LINEAGE_FAULT_POINT=name set, the process either parks there, after writing its
pid to LINEAGE_FAULT_READY, until a test SIGKILLs it (LINEAGE_FAULT_ACTION=park, the
default), or raises ENOSPC there (LINEAGE_FAULT_ACTION=enospc).
"""

from __future__ import annotations

import errno
import os
import time

POINT_ENV = "LINEAGE_FAULT_POINT"
ACTION_ENV = "LINEAGE_FAULT_ACTION"
READY_ENV = "LINEAGE_FAULT_READY"


def reach(point: str) -> None:
    if os.environ.get(POINT_ENV) != point:
        return
    if os.environ.get(ACTION_ENV, "park") == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"<fault point {point}>")
    ready = os.environ.get(READY_ENV)
    if ready:
        with open(ready, "w", encoding="utf-8") as handle:
            handle.write(str(os.getpid()))
    while True:  # parked until killed
        time.sleep(3600)
