#!/usr/bin/env bash
# store_restore.sh with the dump's data restored in the order pg_restore -j may take: the
# store's record before the lease rows, a store call between them, the lease rows before the
# namespaces (see the RESTORE branch there).
RESTORE=staged exec bash "$(dirname "${BASH_SOURCE[0]}")/store_restore.sh" "$@"
