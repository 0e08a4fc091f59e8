// The PostgreSQL headers cosid's thin layer uses, in an order that works from C++.
// postgres.h must come first: port.h redefines snprintf and friends.
#pragma once
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/json.h"  // escape_json: the static keeper's rows for one comparison
#include "utils/uuid.h"
#if PG_VERSION_NUM >= 190000
#include "utils/tuplestore.h"  // no longer pulled in by funcapi.h
#endif
}

// Differences between the PostgreSQL majors cosid builds against (15 to 19), in this one place.
#if PG_VERSION_NUM < 150000
#error "cosid needs PostgreSQL 15 or later (shmem_request_hook, InitMaterializedSRF)"
#endif
// expression_tree_mutator takes a function pointer without prototype until 15 (in C++: no
// parameters), a typed one from 16 on; through void (*)(void), which casts to and from any.
#if PG_VERSION_NUM < 160000
#define COSID_TREE_MUTATOR(f) (reinterpret_cast<Node* (*)()>(reinterpret_cast<void (*)()>(f)))
#else
#define COSID_TREE_MUTATOR(f) (f)
#endif
// This process's number among the PGPROCs (its hazard slot): PGPROC.pgprocno until 16,
// MyProcNumber from 17 on.
#if PG_VERSION_NUM >= 170000
#define COSID_MY_PROC_NUMBER() (MyProcNumber)
#define COSID_MY_LXID() (MyProc->vxid.lxid)
#else
#define COSID_MY_PROC_NUMBER() (MyProc->pgprocno)
#define COSID_MY_LXID() (MyProc->lxid)
#endif
// Whether this transaction holds a lock of exactly that mode: LockHeldByMe took no third
// argument (orstronger) until 16.
#if PG_VERSION_NUM >= 170000
#define COSID_LOCK_HELD_BY_ME(tag, mode) LockHeldByMe((tag), (mode), false)
#else
#define COSID_LOCK_HELD_BY_ME(tag, mode) LockHeldByMe((tag), (mode))
#endif
// Whether the current user owns a database (superusers own everything): pg_database_ownercheck
// until 15, object_ownercheck from 16 on.
#if PG_VERSION_NUM >= 160000
#define COSID_OWNS_DATABASE(db) object_ownercheck(DatabaseRelationId, (db), GetUserId())
#else
#define COSID_OWNS_DATABASE(db) pg_database_ownercheck((db), GetUserId())
#endif
// Signal handlers take the signal's info from 19 on (SIGNAL_ARGS has two parameters), and
// pqsignal wants PG_SIG_IGN there.
#if PG_VERSION_NUM >= 190000
#define COSID_SIG_IGN PG_SIG_IGN
#define COSID_CALL_HANDLER(handler) handler(postgres_signal_arg, pg_siginfo)
#else
#define COSID_SIG_IGN SIG_IGN
#define COSID_CALL_HANDLER(handler) handler(postgres_signal_arg)
#endif
