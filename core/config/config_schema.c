/* The schema: every key of the reference config.yaml (docs/model.md §9.4, §1) and
 * alphast's additions, with type and default. Defaults are the reference
 * code's defaults where it has one (docs/model.md §1, §4, §5), else the config.yaml
 * value; keys without a default mean something by their absence. Keys the
 * reference never reads (docs/model.md §11 item 23) are kept so its config loads. */
#include <string.h>

#include "config_impl.h"

#define MAP(p) {p, CFG_MAP, NULL, NULL, CFG_FREE}
#define INT(p, d, b) {p, CFG_INT, d, NULL, b}
#define FLT(p, d, b) {p, CFG_FLOAT, d, NULL, b}
#define BOOL(p, d) {p, CFG_BOOL, d, NULL, CFG_FREE}
#define STR(p, d) {p, CFG_STR, d, NULL, CFG_FREE}
#define ENUM(p, d, c) {p, CFG_ENUM, d, c, CFG_FREE}
#define ANY(p, d) {p, CFG_ANY, d, NULL, CFG_FREE}

static const cfg_key schema[] = {
    MAP("seed"),
    INT("seed.value", "42", CFG_FREE),
    BOOL("seed.deterministic", "true"),
    BOOL("seed.benchmark", "false"),

    ENUM("training_mode", "joint", "joint|expr_to_pos|pos_to_expr"),
    /* alphast: true restores the reference's choices where alphast's change the numbers: the position loss
     * from loss.use_distance_matrix, x0-prediction of positions, oracle-neighbourhood evaluation. */
    BOOL("reference_parity", "false"),
    /* alphast: the backend steps run on (engine/backend.h); "cpu" in every build. */
    STR("device", "cpu"),

    MAP("diffusion"),
    INT("diffusion.diffusion_steps", "1000", CFG_POSITIVE),
    ENUM("diffusion.diffusion_noise_schedule", "cosine", "cosine"),
    FLT("diffusion.nu_expression", "1.0", CFG_POSITIVE),
    FLT("diffusion.nu_position", "1.0", CFG_POSITIVE),
    ENUM("diffusion.position_parameterisation", "x0", "x0|v"), /* alphast: what the position head predicts (docs/evaluation.md) */

    MAP("loss"),
    FLT("loss.lambda_expression", "1.0", CFG_NONNEG),
    FLT("loss.lambda_position", "1.0", CFG_NONNEG),
    BOOL("loss.use_distance_matrix", "true"), /* the reference's switch: decides only under reference_parity */
    /* alphast: the distance loss ignores any rotation of the prediction, so the network could learn one fixed
     * arrangement whatever its noisy input; "aligned" compares coordinates after the optimal rigid alignment. */
    ENUM("loss.position_loss", "aligned", "aligned|distance|mse"),
    /* alphast: local-structure losses on the x0 prediction of positions (docs/model.md §4.2): soft retrieval of each
     * cell's true kNN (nca), the log-ratios of the true kNN edges' lengths (edge_log_ratio), or both; blind to the
     * prediction's rotation and scale, they ask for the neighbourhoods eval scores. */
    ENUM("loss.structure", "none", "none|nca|edge_log_ratio|both"),
    FLT("loss.lambda_structure", "0.1", CFG_NONNEG), /* weight of each structure loss in the total */
    INT("loss.structure_k", "10", CFG_POSITIVE),     /* true neighbours per cell (eval's knn_k10 uses 10) */
    FLT("loss.nca_temperature", "1.0", CFG_POSITIVE), /* kernel width over the mean squared true kNN distance */

    MAP("masking"),
    BOOL("masking.enable", "false"),
    FLT("masking.expression_mask_ratio", "0.4", CFG_PROB),
    FLT("masking.position_mask_ratio", "0.33", CFG_PROB),
    ENUM("masking.mask_strategy", "random", "random|block|structured"),
    BOOL("masking.mask_expression", "true"),
    BOOL("masking.mask_position", "true"),
    FLT("masking.reconstruction_weight", "0.5", CFG_NONNEG),
    FLT("masking.masking_probability", "0.5", CFG_PROB),
    BOOL("masking.progressive_masking", "false"),
    INT("masking.progressive_steps", "10000", CFG_POSITIVE),
    BOOL("masking.mask_conditioning", "false"),                        /* alphast: mask the clean conditioning modality too */
    ENUM("masking.reconstruction_target", "clean", "clean|input"),    /* alphast: clean x0, or the pre-mask input (reference) */

    MAP("training"),
    FLT("training.learning_rate", "1e-4", CFG_POSITIVE),
    FLT("training.weight_decay", "1e-5", CFG_NONNEG),
    INT("training.batch_size", "32", CFG_POSITIVE),
    INT("training.epochs", "100", CFG_POSITIVE),
    /* alphast computes in float32: the mixed ones load (the reference's file has bf16-mixed) but a run refuses them. */
    ENUM("training.precision", "32-true", "32|32-true|16-mixed|bf16-mixed|tf32"), /* tf32: a GPU's TF32 GEMMs */
    FLT("training.gradient_clip_val", "1.0", CFG_NONNEG),
    INT("training.accumulate_grad_batches", "1", CFG_POSITIVE),
    BOOL("training.cuda_graph", "true"),                     /* alphast: on a GPU, capture the step once and replay it (docs/gpu.md) */
    BOOL("training.early_stopping", "false"),
    INT("training.patience", "10", CFG_POSITIVE),
    INT("training.steps_per_epoch", "50", CFG_POSITIVE),     /* alphast: sets are sampled, so epochs are counted in steps */
    FLT("training.max_minutes", "0", CFG_NONNEG),            /* alphast: stop (with a checkpoint) after this long; 0 = no limit */
    STR("training.init_from", "null"),                       /* alphast: fine-tune from these weights (ours or a PyTorch state_dict, .safetensors) */
    BOOL("training.amsgrad", "true"),                        /* alphast: the reference hard-codes AMSGrad */
    INT("training.val_sets", "16", CFG_POSITIVE),            /* alphast: fixed validation sets */
    INT("training.val_t_points", "4", CFG_POSITIVE),         /* alphast: fixed grid of diffusion times for validation (and t = T) */
    /* alphast: what picks best.safetensors and early stopping: the primary metric of sampled placements of the
     * validation cells (in val_sample_steps sampler steps) or the validation loss (the default: sampled did not
     * measure better, docs/evaluation.md "Model selection"); reference_parity: loss */
    ENUM("training.select_on", "loss", "sampled|loss"),
    INT("training.val_sample_steps", "10", CFG_POSITIVE),    /* alphast: sampler steps of the sampled validation score */
    /* alphast: under mpirun, the AdamW state split over the ranks (ZeRO-1) or whole on each */
    ENUM("training.optimizer_sharding", "zero1", "zero1|replicated"),
    MAP("training.scheduler"), /* absent: constant learning rate */
    ENUM("training.scheduler.type", "cosine", "cosine"),
    INT("training.scheduler.T_max", "100", CFG_POSITIVE),
    FLT("training.scheduler.eta_min", "1e-6", CFG_NONNEG),
    BOOL("training.scheduler.per_step", "false"),            /* alphast: T_max counts steps instead of epochs */
    INT("training.scheduler.warmup_steps", "0", CFG_NONNEG), /* alphast: linear warm-up */

    MAP("distributed"),
    BOOL("distributed.enabled", "false"),
    STR("distributed.strategy", "ddp"),
    INT("distributed.num_nodes", "1", CFG_POSITIVE),
    ANY("distributed.devices", "auto"),
    BOOL("distributed.find_unused_parameters", "false"),
    BOOL("distributed.sync_batchnorm", "true"),
    MAP("distributed.deepspeed"),
    INT("distributed.deepspeed.stage", "2", CFG_POSITIVE),
    BOOL("distributed.deepspeed.offload_optimizer", "false"),
    BOOL("distributed.deepspeed.offload_parameters", "false"),
    MAP("distributed.fsdp"),
    STR("distributed.fsdp.sharding_strategy", "FULL_SHARD"),
    BOOL("distributed.fsdp.cpu_offload", "false"),

    MAP("mlp_in_expression_setting"),
    INT("mlp_in_expression_setting.mlp_in_expression_dims", "128", CFG_POSITIVE),
    INT("mlp_in_expression_setting.mlp_out_expression_dims", "256", CFG_POSITIVE),
    MAP("mlp_in_diffusion_time_setting"),
    INT("mlp_in_diffusion_time_setting.mlp_in_diffusion_time_dims", "64", CFG_POSITIVE),
    INT("mlp_in_diffusion_time_setting.mlp_out_diffusion_time_dims", "64", CFG_POSITIVE),
    MAP("PositionMLP_setting"),
    INT("PositionMLP_setting.hidden_dims", "64", CFG_POSITIVE),
    INT("output_expression_dims", "256", CFG_POSITIVE),
    MAP("TransformerLayer_setting"),
    INT("TransformerLayer_setting.num_layers", "6", CFG_POSITIVE),
    INT("TransformerLayer_setting.num_heads", "8", CFG_POSITIVE),
    INT("TransformerLayer_setting.dim_ff_expression", "1024", CFG_POSITIVE),
    INT("TransformerLayer_setting.dim_ff_diffusion_time", "256", CFG_POSITIVE),
    FLT("TransformerLayer_setting.dropout", "0.1", CFG_PROB),
    FLT("TransformerLayer_setting.layer_norm_eps", "1e-6", CFG_POSITIVE),
    BOOL("TransformerLayer_setting.honour_mask", "true"),
    /* The reference's switches, and the keys the chosen plugin declares as
     * its own (its descriptor's legacy_keys; core/model/model_config.c).
     * gate_type's choices repeat the gated plugin's: the config is checked
     * as it loads, before any plugin is. */
    BOOL("TransformerLayer_setting.use_gated_attention", "false"),
    ENUM("TransformerLayer_setting.gate_type", "headwise", "headwise|elementwise|none"),
    BOOL("TransformerLayer_setting.use_qk_norm", "true"),
    BOOL("TransformerLayer_setting.use_moe", "false"),
    INT("TransformerLayer_setting.num_experts", "8", CFG_POSITIVE),
    INT("TransformerLayer_setting.moe_top_k", "2", CFG_POSITIVE),
    FLT("TransformerLayer_setting.moe_load_balance_loss_weight", "0.01", CFG_NONNEG),
    FLT("TransformerLayer_setting.expert_capacity_factor", "1.25", CFG_POSITIVE),
    MAP("mlp_out_expression_setting"),
    INT("mlp_out_expression_setting.hidden_dims", "512", CFG_POSITIVE),
    MAP("mlp_out_position_norm_setting"),
    INT("mlp_out_position_norm_setting.hidden_dims", "128", CFG_POSITIVE),

    /* alphast: the structural prior (docs/model.md §2.12): per set, an embedding of its own expression offered
     * to the network; only for expr_to_pos, where the expression is given clean. */
    MAP("model"),
    ENUM("model.prior", "auto", "auto|none|isomap|mds"), /* alphast: auto: isomap under a slab or sections, else none */
    BOOL("model.prior_inputs", "false"),         /* alphast: the prior as input channels of every cell's token */
    BOOL("model.prior_residual", "true"),        /* alphast: x0 = prior + learned gain (from 0) * position head */
    INT("model.prior_k", "10", CFG_POSITIVE),    /* alphast: Isomap's expression neighbours, as eval's baseline */
    INT("model.prior_dims", "0", CFG_NONNEG),    /* alphast: embedding axes (1..3); 0 = the data's coordinates */
    {"attention", CFG_PLUGIN, NULL, NULL, CFG_FREE}, /* absent: from use_gated_attention */
    {"ffn", CFG_PLUGIN, NULL, NULL, CFG_FREE},       /* absent: from use_moe */
    {"monitors", CFG_PLUGINS, NULL, NULL, CFG_FREE},

    MAP("data"),
    STR("data.path", "null"),          /* alphast: .h5ad, or CSV/TSV (gzip allowed) */
    STR("data.coords_file", "null"),   /* alphast: CSV genes x cells: the x y z file */
    BOOL("data.genes_by_cells", "false"),
    STR("data.slice_key", "null"),     /* alphast: obs column naming each cell's slice */
    BOOL("data.detect_sections", "true"), /* alphast: no slice_key: obs sections on top of each other are an error */
    STR("data.layer", "null"),         /* alphast: .h5ad: read layers/<name> instead of X (scanpy's layer=) */
    BOOL("data.use_raw", "false"),     /* alphast: .h5ad: read raw/X and raw/var instead of X (scanpy's use_raw=True) */
    INT("data.set_size", "64", CFG_NONNEG), /* alphast: cells per neighbourhood set (N); 0: whole slices */
    ENUM("data.train_sets", "auto", "auto|patches|slices"), /* alphast: auto: slices for random/blocks, else patches */
    STR("data.cache_dir", "auto"),     /* alphast: preprocessing cache; auto: $XDG_CACHE_HOME/alphast or ~/.cache/alphast; null: off */
    STR("data.raw_data_dir", "./data/raw"),
    STR("data.processed_data_dir", "./data/processed"),
    MAP("data.preprocessing"),
    STR("data.preprocessing.gene_list_file", "null"),
    STR("data.preprocessing.position_key", "ccf"),
    BOOL("data.preprocessing.position_is_3d", "true"),
    FLT("data.preprocessing.z_spacing", "1.0", CFG_POSITIVE),
    STR("data.preprocessing.cell_type_key", "cell_type"),
    BOOL("data.preprocessing.scale", "true"),
    BOOL("data.preprocessing.log_normalize", "true"),
    FLT("data.preprocessing.clip", "10", CFG_POSITIVE),
    BOOL("data.preprocessing.normalize_position", "false"),
    MAP("data.loading"),
    STR("data.loading.mode", "slice"),
    INT("data.loading.num_workers", "4", CFG_NONNEG),
    FLT("data.loading.train_ratio", "0.8", CFG_PROB),
    FLT("data.loading.val_ratio", "0.1", CFG_PROB),
    FLT("data.loading.expression_dropout", "0.1", CFG_PROB),
    BOOL("data.loading.rotation", "true"),
    MAP("data.split_ratio"),
    FLT("data.split_ratio.train", "0.8", CFG_PROB),
    FLT("data.split_ratio.val", "0.1", CFG_PROB),
    FLT("data.split_ratio.test", "0.1", CFG_PROB),
    /* alphast: the held-out protocol (docs/evaluation.md, Protocol); auto: sections with 3+ sections, else slab */
    ENUM("data.split", "auto", "auto|slab|blocks|random|sections|key"),
    STR("data.split_key", "null"),            /* alphast: obs column of train/val/test per cell; alone implies key */
    INT("data.split_seed", "0", CFG_FREE),    /* alphast: the deal of blocks and random; not seed.value */
    INT("data.sections_from_z", "0", CFG_NONNEG), /* alphast: K > 0 cuts one 3-D slice into K z-sections */

    MAP("sampling"),
    INT("sampling.num_steps", "100", CFG_POSITIVE),
    ENUM("sampling.mode", "joint", "joint|expr_to_pos|pos_to_expr"),
    ENUM("sampling.return", "x0", "x0|z0"),                  /* alphast: last x0 prediction, or the reference's noisy z0 */

    MAP("logging"),
    ENUM("logging.logger", "tensorboard", "tensorboard|wandb|none"), /* alphast: none, no events file */
    STR("logging.wandb_project", "alphastomics"),
    INT("logging.log_every_n_steps", "10", CFG_POSITIVE),
    INT("logging.save_top_k", "3", CFG_FREE),
    STR("logging.save_dir", "./outputs"),

    MAP("evaluation"),
    INT("evaluation.k_neighbors", "10", CFG_POSITIVE),
    BOOL("evaluation.compute_spatial_metrics", "true"),
    INT("evaluation.sets", "16", CFG_POSITIVE),              /* alphast: oracle_neighbourhoods: sets scored */
    ANY("evaluation.morans_genes", "null"),                  /* alphast: gene names for Moran's I; null: the 5 most
                                                                spatially variable in the true coordinates */
    /* alphast: region places every held-out cell of a slice at once (split by expression above max_set_size);
     * oracle_neighbourhoods scores sets made of each centre's nearest cells by true position. */
    ENUM("evaluation.protocol", "region", "region|oracle_neighbourhoods"),
    INT("evaluation.max_set_size", "1024", CFG_POSITIVE),
    INT("evaluation.seed", "0", CFG_FREE),                   /* alphast: eval cells, sets and noise; not seed.value */
    INT("evaluation.noise_seeds", "4", CFG_POSITIVE),        /* alphast: samples per set for the uncertainty measures
                                                                (docs/evaluation.md: 4 costs 1.7x the evaluation of 2) */
    BOOL("evaluation.after_train", "true"),                  /* alphast: train ends with the held-out evaluation */
    /* alphast: the mlp_regression baseline (expression -> position MLP fitted on the training cells, shared frame
     * only) and its epochs at most (early stopping on a tenth of those cells); false skips its cost */
    BOOL("evaluation.mlp_regression", "true"),
    INT("evaluation.mlp_epochs", "60", CFG_POSITIVE),
};

#define N_KEYS ((int)(sizeof schema / sizeof schema[0]))

const cfg_key *cfg_schema_find(const char *path)
{
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(schema[i].path, path)) return &schema[i];
    return NULL;
}

const char *ast_cfg_default(const char *path)
{
    const cfg_key *k = cfg_schema_find(path);
    return k ? k->def : NULL;
}

/* Is `path` one level below `parent`? */
static int is_child(const char *path, const char *parent)
{
    size_t n = strlen(parent);
    if (n) {
        if (strncmp(path, parent, n) || path[n] != '.') return 0;
        path += n + 1;
    }
    return !strchr(path, '.');
}

int cfg_schema_children(const char *parent, const char **names, int max)
{
    int n = 0;
    for (int i = 0; i < N_KEYS && n < max; i++)
        if (is_child(schema[i].path, parent)) {
            const char *dot = strrchr(schema[i].path, '.');
            names[n++] = dot ? dot + 1 : schema[i].path;
        }
    return n;
}
