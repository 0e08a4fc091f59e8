-- cosid 1.5 -> 1.6: forks of an issuing server, a change of store, bounded floor raises by
-- keepers, column defaults bound to their namespace.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.6'" to load this file. \quit
