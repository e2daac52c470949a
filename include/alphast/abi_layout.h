/* alphast/abi_layout.h: the byte offset of every field of every struct of
 * the plugin ABI on 64-bit platforms, asserted at compile time. A field
 * moved, removed or inserted before the tail changes an offset and fails
 * the build of the host and of every plugin, instead of making an older
 * plugin call the wrong function. New fields go at the tail, with a line
 * here. Included by plugin.h; not meant to be included alone. */
#ifndef ALPHAST_ABI_LAYOUT_H
#define ALPHAST_ABI_LAYOUT_H

#if defined(__LP64__) || defined(_WIN64)
#ifdef __cplusplus
#define AST_AT(type, field, off) static_assert(offsetof(type, field) == (off), #type "." #field " moved");
#else
#define AST_AT(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field " moved");
#endif

AST_AT(ast_tensor, data, 0) AST_AT(ast_tensor, grad, 8) AST_AT(ast_tensor, ndim, 16)
AST_AT(ast_tensor, shape, 24) AST_AT(ast_tensor, size, 56) AST_AT(ast_tensor, flags, 64)
AST_AT(ast_tensor, name, 72) AST_AT(ast_tensor, memory, 80) AST_AT(ast_tensor, device, 84)

AST_AT(ast_node, op, 0) AST_AT(ast_node, backward, 8) AST_AT(ast_node, out, 16) AST_AT(ast_node, in, 24)
AST_AT(ast_node, n_in, 88) AST_AT(ast_node, saved, 96) AST_AT(ast_node, iarg, 104) AST_AT(ast_node, farg, 136)

AST_AT(ast_option_spec, name, 0) AST_AT(ast_option_spec, type, 8) AST_AT(ast_option_spec, def, 16)
AST_AT(ast_option_spec, min, 24) AST_AT(ast_option_spec, max, 32) AST_AT(ast_option_spec, choices, 40)
AST_AT(ast_option_spec, help, 48)
AST_AT(ast_optval, i, 0) AST_AT(ast_optval, f, 8) AST_AT(ast_optval, s, 16)

AST_AT(ast_layer_dims, d_model, 0) AST_AT(ast_layer_dims, heads, 4) AST_AT(ast_layer_dims, d_ff, 8)
AST_AT(ast_layer_dims, d_time, 12) AST_AT(ast_layer_dims, layer, 16) AST_AT(ast_layer_dims, num_layers, 20)
AST_AT(ast_layer_dims, dropout, 24) AST_AT(ast_layer_dims, ln_eps, 28)

AST_AT(ast_create_args, host, 0) AST_AT(ast_create_args, scope, 8) AST_AT(ast_create_args, dims, 16)
AST_AT(ast_create_args, opts, 24) AST_AT(ast_create_args, backend, 32)
AST_AT(ast_fwd_args, mask, 0) AST_AT(ast_fwd_args, time, 8) AST_AT(ast_fwd_args, positions, 16)
AST_AT(ast_fwd_args, layer, 24)
AST_AT(ast_fwd_args, geodesic, 32)
AST_AT(ast_stat, name, 0) AST_AT(ast_stat, layer, 8) AST_AT(ast_stat, n, 12) AST_AT(ast_stat, values, 16)
AST_AT(ast_observation, phase, 0) AST_AT(ast_observation, step, 8) AST_AT(ast_observation, epoch, 16)
AST_AT(ast_observation, stats, 24) AST_AT(ast_observation, n_stats, 32) AST_AT(ast_observation, sink, 40)

AST_AT(ast_ops, n_ops, 0)
#define AST_OP(slot, ret, name, params, args) AST_AT(ast_ops, name, 8 + 8 * (slot))
#include "alphast/ops.def"
#undef AST_OP

AST_AT(ast_host, abi_major, 0) AST_AT(ast_host, abi_minor, 4) AST_AT(ast_host, struct_size, 8)
AST_AT(ast_host, ops, 16) AST_AT(ast_host, param, 24) AST_AT(ast_host, buffer, 32) AST_AT(ast_host, alloc, 40)
AST_AT(ast_host, alloc_uninit, 48) AST_AT(ast_host, training, 56) AST_AT(ast_host, grad_enabled, 64)
AST_AT(ast_host, grad, 72) AST_AT(ast_host, record, 80) AST_AT(ast_host, rng_u64, 88)
AST_AT(ast_host, rng_uniform, 96) AST_AT(ast_host, rng_normal, 104) AST_AT(ast_host, add_loss, 112)
AST_AT(ast_host, stat, 120) AST_AT(ast_host, scheduled, 128) AST_AT(ast_host, parallel_for, 136)
AST_AT(ast_host, sgemm, 144) AST_AT(ast_host, emit, 152) AST_AT(ast_host, warn_once, 160)
AST_AT(ast_host, log, 168) AST_AT(ast_host, read, 176) AST_AT(ast_host, write, 184)
AST_AT(ast_host, rng_key, 192) AST_AT(ast_host, stats_wanted, 200)
AST_AT(ast_host, stat_tensor, 208)

AST_AT(ast_kernel, op, 0) AST_AT(ast_kernel, backend, 8) AST_AT(ast_kernel, fn, 16)
AST_AT(ast_plugin_desc, abi_major, 0) AST_AT(ast_plugin_desc, abi_minor, 4) AST_AT(ast_plugin_desc, struct_size, 8)
AST_AT(ast_plugin_desc, kind, 12) AST_AT(ast_plugin_desc, name, 16) AST_AT(ast_plugin_desc, version, 24)
AST_AT(ast_plugin_desc, summary, 32) AST_AT(ast_plugin_desc, options, 40) AST_AT(ast_plugin_desc, n_options, 48)
AST_AT(ast_plugin_desc, create, 56) AST_AT(ast_plugin_desc, destroy, 64) AST_AT(ast_plugin_desc, forward, 72)
AST_AT(ast_plugin_desc, observe, 80) AST_AT(ast_plugin_desc, active_params, 88)
AST_AT(ast_plugin_desc, kernels, 96) AST_AT(ast_plugin_desc, n_kernels, 104)
AST_AT(ast_plugin_desc, legacy_keys, 112) AST_AT(ast_plugin_desc, n_legacy_keys, 120)
AST_AT(ast_legacy_key, key, 0) AST_AT(ast_legacy_key, option, 8)
AST_AT(ast_plugin_desc, wants_geodesic, 124)

#undef AST_AT
#endif
#endif
