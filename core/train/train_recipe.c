/* The recipe `auto` settles once the held-out cells are known: what trains
 * best depends on them (issue 23's screen, docs/evaluation.md "The default
 * recipe", 3 datasets x 3 protocols x 3 seeds):
 * - held-out cells scattered over slices that were trained on (random
 *   cells, blocks): train on whole slices, one per step, so the network
 *   sees the anatomy it will place cells into, as evaluation places every
 *   held-out cell of a slice at once (STARmap random: knn_k10 0.110 and
 *   dist_row_spearman 0.457 against patches' 0.072 / 0.128 and the best
 *   baseline's 0.099 / 0.441);
 * - whole regions held out (an end slab, sections): patches, and the
 *   expression's Isomap as the base of the position prediction, since
 *   nothing near those cells was trained on and the whole-slice unit does
 *   not fit a slab (Visium slab: 0.169 against patches alone 0.143 and
 *   whole slices 0.112).
 * reference_parity keeps the reference's patches and no prior. */
#include <stdio.h>
#include <string.h>

#include "train/train.h"
#include "train/train_dist.h"

static int is_auto(const ast_cfg *cfg, const char *key) { return !strcmp(ast_cfg_str(cfg, key), "auto"); }

int ast_train_resolve_recipe(ast_cfg *cfg, ast_split_kind kind, ast_error *e)
{
    int parity = ast_cfg_bool(cfg, "reference_parity");
    int scattered = !parity && (kind == AST_SPLIT_RANDOM || kind == AST_SPLIT_BLOCKS);
    int regions = !parity && (kind == AST_SPLIT_SLAB || kind == AST_SPLIT_SECTIONS);
    if (is_auto(cfg, "data.train_sets") && ast_cfg_set(cfg, "data.train_sets", scattered ? "slices" : "patches", e) < 0)
        return -1;
    if (!strcmp(ast_cfg_str(cfg, "data.train_sets"), "slices")) {
        char per_step[16]; /* a slice per rank: every rank trains on one */
        snprintf(per_step, sizeof per_step, "%d", ast_dist_size() > 1 ? ast_dist_size() : 1);
        if (ast_cfg_set(cfg, "data.set_size", "0", e) < 0 || ast_cfg_set(cfg, "training.batch_size", per_step, e) < 0)
            return -1;
    }
    /* The prior is the base of x0, which only expr_to_pos with x0-prediction has. */
    int prior = regions && !strcmp(ast_cfg_str(cfg, "training_mode"), "expr_to_pos") &&
                !strcmp(ast_cfg_str(cfg, "diffusion.position_parameterisation"), "x0");
    return is_auto(cfg, "model.prior") ? ast_cfg_set(cfg, "model.prior", prior ? "isomap" : "none", e) : 0;
}
