#!/usr/bin/env bash
# A raise of the store's floors with two namespaces in use, and the keeper exiting right after
# the store granted w's successor (its answer lost: the successor's acquire an orphan; shared
# memory kept, the freed leases and v's successor request in it): raised_keeper_restart.sh's
# drill with the keeper's exit instead of a SIGTERM.
#   bash test/e2e/raised_keeper_exit.sh WORKDIR
COSID_KEEPER_HOW="exit" exec bash "$(dirname "${BASH_SOURCE[0]}")/raised_keeper_restart.sh" "$@"
