-- cosid 1.6 -> 1.7: what a copy cannot see (the reach cap, forks that belong to the data
-- directory), a shared store's tenants, and cheaper acquires.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.7'" to load this file. \quit

-- >>> reach cap (docs/safety.md: what a copy cannot see)

-- >>> forks of the data directory

-- >>> tenants of a shared store

-- >>> acquire cost
