"""Jobs run apart on a runner host (DESIGN.md "Jobs run apart").

Each job runs as its own unprivileged user (:mod:`.users`), with a private ``/tmp`` (:mod:`.mounts`, done by
the launcher before it drops its privileges), in its own cgroup that is killed whole at the job's end
(:mod:`.cgroups`). :mod:`.probe` finds out at start what the host allows and says what is missing.

The launcher imports :mod:`.mounts` only: nothing here imports anything outside the standard library at
import time, so the launcher still starts in a few tens of milliseconds.
"""
