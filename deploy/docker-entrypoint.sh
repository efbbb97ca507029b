#!/bin/sh
# The entry point of Kerrigan's image (deploy/Dockerfile).
#
# Before `kerrigan serve`, bring the database schema up to date with `kerrigan db upgrade`; then run the
# command with exec, so that it is the container's main process and `docker stop`'s SIGTERM reaches it.
#
# Only `kerrigan serve` upgrades: the other commands (`kerrigan worker`, `kerrigan inventory import`,
# `kerrigan tokens create`, ...) refuse a schema that is behind with one line saying so, and migrating from
# several containers at the same moment would race. compose.yaml starts the worker once the server is
# healthy, that is, after the upgrade.
set -eu

if [ "$#" -eq 0 ]; then
    set -- kerrigan serve
fi

if [ "$1" = "kerrigan" ] && [ "${2:-}" = "serve" ]; then
    kerrigan db upgrade
fi

exec "$@"
