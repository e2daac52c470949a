/* KEY=VALUE overrides (alphast-run train ... KEY=VALUE, sweep scripts): the
 * input is up to 32 lines, each one override applied in order to a small
 * valid config. A failed override leaves the config as it was and says
 * why; the result still dumps and loads back to the same config. */
#include "fuzz_cfg.h"

/* Every top-level block, a plugin with options and a monitor list, so
 * overrides meet maps, sequences, plugin forms and scalars of each type. */
static const char base_yaml[] =
    "training_mode: joint\n"
    "seed: {value: 7}\n"
    "data:\n"
    "  path: data.h5ad\n"
    "  set_size: 12\n"
    "  preprocessing: {position_key: spatial, cell_type_key: null}\n"
    "  split_ratio: {train: 0.8, val: 0.1, test: 0.1}\n"
    "diffusion: {diffusion_steps: 100, diffusion_noise_schedule: cosine}\n"
    "loss: {lambda_expression: 1.0, lambda_position: 1.0}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 2, steps_per_epoch: 3, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false, scheduler: {type: cosine, T_max: 2}}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}\n"
    "PositionMLP_setting: {hidden_dims: 4}\n"
    "TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}\n"
    "mlp_out_expression_setting: {hidden_dims: 8}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 4}\n"
    "attention: {name: gated, gate_type: headwise}\n"
    "ffn: dense\n"
    "monitors: [grad_norm, {name: moe_balance, every: 10}]\n";

#define MAX_OVERRIDES 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(base_yaml, "base.yaml", &e);
    FUZZ_CHECK(cfg, "the base config does not load: %s", e.msg);
    char *text = fuzz_text(data, size), *line = text;
    for (int i = 0; i < MAX_OVERRIDES && line; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *before = ast_cfg_dump_string(cfg, &e);
        FUZZ_CHECK(before, "the config cannot be dumped: %s", e.msg);
        e.msg[0] = 0;
        if (ast_cfg_override(cfg, line, &e) < 0) {
            FUZZ_CHECK_ERROR(&e, "ast_cfg_override");
            char *after = ast_cfg_dump_string(cfg, &e);
            FUZZ_CHECK(after && !strcmp(before, after), "a failed override changed the config\n--- before:\n%s--- after:\n%s",
                       before, after ? after : "(cannot be dumped)");
            free(after);
        }
        free(before);
        line = nl ? nl + 1 : NULL;
    }
    fuzz_cfg_roundtrip(cfg);
    ast_cfg_free(cfg);
    free(text);
    return 0;
}
