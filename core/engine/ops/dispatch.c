/* ast_<op>: every op of ops.def runs the kernel of its context's backend.
 * These are also the functions in the host table's op set, so a plugin
 * built from ops runs on whichever backend the step uses. */
#include "engine/backend.h"

#define AST_OP(slot, ret, name, params, args) \
    ret ast_##name params { return ast_ctx_backend(c)->ops->name args; }
#include "alphast/ops.def"
#undef AST_OP
