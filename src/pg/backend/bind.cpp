// Column and domain defaults bound to their namespace (docs/safety.md).  A default
// `cosid_next()` reads cosid.namespace in the inserting session, which any role may SET and
// a pooler may carry from one client to the next: two sessions inserting into one table then
// issue in two id spaces, and equal (slot, tick, sequence) in both are equal ids.  The event
// trigger cosid.bind_defaults (sql) rewrites such a default, when it is made, into
// `cosid_next('<namespace>')`; this file holds the two pieces it needs from C: the session's
// namespace without its SET, and the rewrite of an expression tree (every call of
// cosid_next() without argument becomes cosid_next(<namespace>), whatever surrounds it),
// deparsed as pg_get_expr would.
#include "../boundary.hpp"
#include "../settings.hpp"

extern "C" {
#include "catalog/pg_collation.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/ruleutils.h"
}

using namespace cosid::pg;

extern "C" {
PG_FUNCTION_INFO_V1(cosid_namespace_reset);
PG_FUNCTION_INFO_V1(cosid_bind_expr);
}

namespace {

struct BindContext {
    Oid unbound;     // cosid_next()
    Oid bound;       // cosid_next(text)
    const char* ns;  // the namespace to name
    int replaced;
};

Node* bind_mutator(Node* node, void* arg) {
    if (node == nullptr) return nullptr;
    BindContext* ctx = static_cast<BindContext*>(arg);
    if (IsA(node, FuncExpr)) {
        FuncExpr* f = reinterpret_cast<FuncExpr*>(node);
        if (f->funcid == ctx->unbound && f->args == NIL) {
            Const* name = makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1, CStringGetTextDatum(ctx->ns), false, false);
            FuncExpr* call = makeFuncExpr(ctx->bound, INT8OID, list_make1(name), InvalidOid, DEFAULT_COLLATION_OID,
                                          COERCE_EXPLICIT_CALL);
            call->location = f->location;
            ctx->replaced++;
            return reinterpret_cast<Node*>(call);
        }
    }
    return expression_tree_mutator(node, COSID_TREE_MUTATOR(bind_mutator), arg);
}

}  // namespace

// cosid._namespace_reset(): the namespace this session's cosid_next() issues in without a
// SET: from the server's configuration, ALTER SYSTEM, ALTER DATABASE, ALTER ROLE (of the
// session's user) or the connection's options, never from SET, SET LOCAL or set_config().
extern "C" Datum cosid_namespace_reset(PG_FUNCTION_ARGS) {
    const char* v = GetConfigOptionResetString("cosid.namespace");
    if (v == nullptr || !valid_namespace_name(v)) PG_RETURN_NULL();
    PG_RETURN_TEXT_P(cstring_to_text(v));
}

// cosid._bind_expr(expr pg_node_tree, rel oid, unbound oid, bound oid, namespace text):
// the expression with every cosid_next() call given the namespace, as pg_get_expr shows it
// (rel: the default's table, 0 for a domain's); NULL when it holds no such call.
extern "C" Datum cosid_bind_expr(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 5; ++i)
        if (PG_ARGISNULL(i)) PG_RETURN_NULL();
    char* tree = text_to_cstring(PG_GETARG_TEXT_PP(0));
    Oid rel = PG_GETARG_OID(1);
    BindContext ctx;
    ctx.unbound = PG_GETARG_OID(2);
    ctx.bound = PG_GETARG_OID(3);
    char* ns = text_to_cstring(PG_GETARG_TEXT_PP(4));
    if (!valid_namespace_name(ns))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid namespace name \"%s\"", ns),
                        errdetail("A namespace name is 1 to 63 letters, digits, \"_\", \".\", \":\" or \"-\".")));
    ctx.ns = ns;
    ctx.replaced = 0;
    Node* expr = static_cast<Node*>(stringToNode(tree));
    expr = bind_mutator(expr, &ctx);
    if (ctx.replaced == 0) PG_RETURN_NULL();
    List* dpcontext = NIL;
    if (OidIsValid(rel)) {
        char* relname = get_rel_name(rel);
        if (relname == nullptr) PG_RETURN_NULL();  // dropped meanwhile
        dpcontext = deparse_context_for(relname, rel);
    }
    PG_RETURN_TEXT_P(cstring_to_text(deparse_expression(expr, dpcontext, false, false)));
}
