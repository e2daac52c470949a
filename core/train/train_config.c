/* The training run's settings as the config gives them: data options,
 * loop settings and the loss, from the keys of docs/model.md §9.4 plus alphast's
 * additions (see config_schema.c). */
#include <string.h>

#include "train/train.h"

int ast_data_opts_from_cfg(const ast_cfg *cfg, ast_data_opts *o)
{
    ast_data_opts_default(o);
    o->position_key = ast_cfg_str(cfg, "data.preprocessing.position_key");
    o->cell_type_key = ast_cfg_str(cfg, "data.preprocessing.cell_type_key");
    o->slice_key = ast_cfg_str(cfg, "data.slice_key");
    o->detect_sections = ast_cfg_bool(cfg, "data.detect_sections");
    o->layer = ast_cfg_str(cfg, "data.layer");
    o->use_raw = ast_cfg_bool(cfg, "data.use_raw");
    o->coords_file = ast_cfg_str(cfg, "data.coords_file");
    o->label_column = ast_cfg_str(cfg, "data.split_key"); /* a CSV's split column is no gene */
    o->genes_by_cells = ast_cfg_bool(cfg, "data.genes_by_cells");
    o->log_normalize = ast_cfg_bool(cfg, "data.preprocessing.log_normalize");
    o->scale = ast_cfg_bool(cfg, "data.preprocessing.scale");
    o->clip = (float)ast_cfg_float(cfg, "data.preprocessing.clip");
    o->z_spacing = (float)ast_cfg_float(cfg, "data.preprocessing.z_spacing");
    return 0;
}

int ast_split_opts_from_cfg(const ast_cfg *cfg, ast_split_opts *o, ast_error *e)
{
    memset(o, 0, sizeof *o);
    ast_split_kind_parse(ast_cfg_str(cfg, "data.split"), &o->kind); /* the schema's enum */
    o->val = ast_cfg_float(cfg, "data.split_ratio.val");
    o->test = ast_cfg_float(cfg, "data.split_ratio.test");
    o->seed = (uint64_t)ast_cfg_int(cfg, "data.split_seed");
    o->key = ast_cfg_str(cfg, "data.split_key");
    o->sections_from_z = (int)ast_cfg_int(cfg, "data.sections_from_z");
    if (o->key && o->kind == AST_SPLIT_AUTO) o->kind = AST_SPLIT_KEY; /* the key alone says it */
    if (o->key && o->kind != AST_SPLIT_KEY) {
        const ast_cfg_node *n = ast_cfg_get(cfg, "data.split_key");
        ast_error_set(e, "%s: data.split_key is set and data.split is %s; set data.split: key to use the column, or "
                      "data.split_key: null", n ? n->where : "config", ast_split_kind_name(o->kind));
        return -1;
    }
    return 0;
}

/* loss.position_loss decides; under reference_parity the reference's
 * switch loss.use_distance_matrix does (distance, else coordinate MSE). */
static ast_pos_loss position_loss_from_cfg(const ast_cfg *cfg)
{
    if (ast_cfg_bool(cfg, "reference_parity"))
        return ast_cfg_bool(cfg, "loss.use_distance_matrix") ? AST_POS_LOSS_DISTANCE : AST_POS_LOSS_MSE;
    static const char *const names[] = {[AST_POS_LOSS_ALIGNED] = "aligned", [AST_POS_LOSS_DISTANCE] = "distance",
                                        [AST_POS_LOSS_MSE] = "mse"};
    const char *name = ast_cfg_str(cfg, "loss.position_loss");
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
        if (name && !strcmp(name, names[k])) return (ast_pos_loss)k;
    AST_ASSERT(0, "loss.position_loss: unknown value '%s' (the schema's enum should have rejected it)", name);
    return AST_POS_LOSS_ALIGNED;
}

/* loss.structure and its settings (the schema's enum and bounds). */
static void structure_from_cfg(const ast_cfg *cfg, ast_loss_config *lc)
{
    static const char *const names[] = {[AST_STRUCTURE_NONE] = "none", [AST_STRUCTURE_NCA] = "nca",
                                        [AST_STRUCTURE_EDGE_LOG_RATIO] = "edge_log_ratio",
                                        [AST_STRUCTURE_BOTH] = "both"};
    const char *name = ast_cfg_str(cfg, "loss.structure");
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
        if (name && !strcmp(name, names[k])) lc->structure = (ast_structure)k;
    lc->lambda_structure = (float)ast_cfg_float(cfg, "loss.lambda_structure");
    lc->structure_k = (int)ast_cfg_int(cfg, "loss.structure_k");
    lc->nca_temperature = (float)ast_cfg_float(cfg, "loss.nca_temperature");
}

/* diffusion.position_parameterisation; the reference predicts x0. */
static ast_pos_param pos_param_from_cfg(const ast_cfg *cfg)
{
    ast_pos_param p = AST_POS_X0;
    if (!ast_cfg_bool(cfg, "reference_parity"))
        ast_pos_param_parse(ast_cfg_str(cfg, "diffusion.position_parameterisation"), &p); /* the schema's enum */
    return p;
}

int ast_precision_from_cfg(const ast_cfg *cfg, ast_precision *p, ast_error *e)
{
    const ast_cfg_node *n = ast_cfg_get(cfg, "training.precision");
    const char *name = ast_cfg_str(cfg, "training.precision"); /* the schema's enum */
    char why[256];
    *p = AST_PRECISION_FP32;
    if (!strcmp(name, "32-true") || !strcmp(name, "32")) return 0;
    const char *device = ast_cfg_str(cfg, "device");
    int on_cpu = !device || !strcmp(device, "cpu");
    if (!strcmp(name, "tf32")) {
        if (!on_cpu) return *p = AST_PRECISION_TF32, 0;
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "'tf32' is a GPU's mode (TF32 tensor cores) and the run is "
                     "on the CPU; train on a GPU (device: cuda) or in float32 with training.precision: 32-true");
        return -1;
    }
    if (strcmp(name, "bf16-mixed")) {
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "'%s' is not supported: alphast has no float16 mode; write "
                     "training.precision: 32-true, bf16-mixed or tf32", name);
        return -1;
    }
    /* On a GPU, cuBLAS runs the bf16 GEMMs on its tensor cores; the check is the CPU's. */
    if (on_cpu && !ast_bf16_supported(why, sizeof why)) {
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "'bf16-mixed' cannot run here: %s; train in float32 with "
                     "training.precision: 32-true", why);
        return -1;
    }
    *p = AST_PRECISION_BF16;
    return 0;
}

int ast_train_config_from_cfg(const ast_cfg *cfg, ast_train_config *tc, ast_error *e)
{
    ast_train_config_default(tc);
    const char *mode = ast_cfg_str(cfg, "training_mode");
    if (ast_mode_parse(mode, &tc->mode) < 0) { /* the schema's enum makes this unreachable from YAML */
        ast_error_set(e, "training_mode: unknown mode '%s'", mode);
        return -1;
    }
    if (ast_split_opts_from_cfg(cfg, &tc->split, e) < 0) return -1;
    tc->diffusion_steps = (int)ast_cfg_int(cfg, "diffusion.diffusion_steps");
    tc->nu_expression = ast_cfg_float(cfg, "diffusion.nu_expression");
    tc->nu_position = ast_cfg_float(cfg, "diffusion.nu_position");
    tc->loss.lambda_expression = (float)ast_cfg_float(cfg, "loss.lambda_expression");
    tc->loss.lambda_position = (float)ast_cfg_float(cfg, "loss.lambda_position");
    tc->loss.position_loss = position_loss_from_cfg(cfg);
    structure_from_cfg(cfg, &tc->loss);
    tc->pos_param = pos_param_from_cfg(cfg);
    tc->loss.expression_noised = ast_mode_noises(tc->mode, AST_MOD_EXPR);
    tc->loss.positions_noised = ast_mode_noises(tc->mode, AST_MOD_POS);
    if (ast_masking_config_from_cfg(cfg, tc->mode, &tc->masking, e) < 0) return -1;

    tc->sets_per_step = (int)ast_cfg_int(cfg, "training.batch_size");
    tc->set_size = (int)ast_cfg_int(cfg, "data.set_size");
    tc->region_cap = (int)ast_cfg_int(cfg, "evaluation.max_set_size");
    tc->rotate = ast_cfg_bool(cfg, "data.loading.rotation");
    tc->expr_dropout = (float)ast_cfg_float(cfg, "data.loading.expression_dropout");
    tc->epochs = (int)ast_cfg_int(cfg, "training.epochs");
    tc->steps_per_epoch = (int)ast_cfg_int(cfg, "training.steps_per_epoch");
    tc->accumulate = (int)ast_cfg_int(cfg, "training.accumulate_grad_batches");
    tc->cuda_graph = ast_cfg_bool(cfg, "training.cuda_graph");
    tc->adamw.lr = (float)ast_cfg_float(cfg, "training.learning_rate");
    tc->adamw.weight_decay = (float)ast_cfg_float(cfg, "training.weight_decay");
    tc->adamw.amsgrad = ast_cfg_bool(cfg, "training.amsgrad");
    tc->lr.lr = tc->adamw.lr;
    tc->lr.warmup_steps = ast_cfg_int(cfg, "training.scheduler.warmup_steps");
    if (ast_cfg_get(cfg, "training.scheduler")) {
        tc->lr.kind = AST_LR_COSINE;
        tc->lr.t_max = ast_cfg_int(cfg, "training.scheduler.T_max");
        tc->lr.eta_min = (float)ast_cfg_float(cfg, "training.scheduler.eta_min");
        tc->lr.per_step = ast_cfg_bool(cfg, "training.scheduler.per_step");
    }
    tc->clip_norm = ast_cfg_float(cfg, "training.gradient_clip_val");
    tc->early_stopping = ast_cfg_bool(cfg, "training.early_stopping");
    tc->patience = (int)ast_cfg_int(cfg, "training.patience");
    tc->val_sets = (int)ast_cfg_int(cfg, "training.val_sets");
    tc->val_t_points = (int)ast_cfg_int(cfg, "training.val_t_points");
    /* The reference validates on the loss alone, at random t below T. */
    int parity = ast_cfg_bool(cfg, "reference_parity");
    tc->val_at_T = !parity;
    tc->val_sample_steps = (int)ast_cfg_int(cfg, "training.val_sample_steps");
    const char *select_on = ast_cfg_str(cfg, "training.select_on"); /* the schema's enum */
    tc->select_on = parity || (select_on && !strcmp(select_on, "loss")) ? AST_SELECT_LOSS : AST_SELECT_SAMPLED;
    tc->max_minutes = ast_cfg_float(cfg, "training.max_minutes");
    tc->init_from = ast_cfg_str(cfg, "training.init_from");
    const char *logger = ast_cfg_str(cfg, "logging.logger"); /* the schema's enum */
    tc->tensorboard = logger && !strcmp(logger, "tensorboard");
    tc->seed = (uint64_t)ast_cfg_int(cfg, "seed.value");
    const char *sharding = ast_cfg_str(cfg, "training.optimizer_sharding"); /* the schema's enum */
    tc->sharding = sharding && !strcmp(sharding, "replicated") ? AST_SHARD_REPLICATED : AST_SHARD_ZERO1;
    if (ast_precision_from_cfg(cfg, &tc->precision, e) < 0) return -1;
    if (tc->set_size == 1) { /* 0 means whole slices */
        ast_error_set(e, "data.set_size: a set needs at least 2 cells for the distance loss (got 1); use 0 for whole slices");
        return -1;
    }
    return 0;
}
