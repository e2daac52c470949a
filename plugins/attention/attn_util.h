/* Helpers shared by the attention plugins (compiled into each of them). */
#ifndef ALPHAST_ATTN_UTIL_H
#define ALPHAST_ATTN_UTIL_H

#include "alphast/plugin.h"

/* The parameters of a PyTorch Linear(in, out) named "<name>.weight" [out, in]
 * and, when b is not NULL, "<name>.bias" [out]; both U(+-1/sqrt(in)) as
 * PyTorch's default init. */
void attn_linear_params(const ast_host *h, ast_scope *s, const char *name, int in, int out,
                        ast_tensor **w, ast_tensor **b);

/* 1 when d_model and heads fit multi-head attention; else 0 with the reason in err. */
int attn_check_dims(const ast_layer_dims *d, const char *plugin, char *err, size_t errlen);

#endif
