// cosid._durable(): every store write durable before the keeper relies on it, whatever the
// server's or role's synchronous_commit.  The keeper joins it into the statement of each
// acquire, renewal and release: a weaker level (off, local, remote_write) becomes "on" for
// that transaction only, as set_config('synchronous_commit', 'on', true) does; a stronger
// one (remote_apply) is kept.  In C: PL/pgSQL would build its condition again in each of
// those transactions.  Plain C inside: an ereport may leave it.
#include "../pg.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(cosid_durable);
}

extern "C" Datum cosid_durable(PG_FUNCTION_ARGS) {
    // the value current_setting('synchronous_commit') shows
    const char* level = GetConfigOption("synchronous_commit", false, false);
    if (strcmp(level, "off") == 0 || strcmp(level, "local") == 0 || strcmp(level, "remote_write") == 0)
        // set_config(..., is_local => true): until the end of the transaction
        (void)set_config_option("synchronous_commit", "on", superuser() ? PGC_SUSET : PGC_USERSET, PGC_S_SESSION,
                                GUC_ACTION_LOCAL, true, 0, false);
    PG_RETURN_VOID();
}
