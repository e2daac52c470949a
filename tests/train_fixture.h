/* What training tests share: a tiny config over the bundled STARmap data,
 * loaded, preprocessed and split, with its model and training settings. */
#ifndef ALPHAST_TEST_TRAIN_FIXTURE_H
#define ALPHAST_TEST_TRAIN_FIXTURE_H

#include "alphast/config.h"
#include "alphast/train.h"

typedef struct train_setup {
    ast_cfg *cfg;
    ast_dataset d;
    ast_split sp[3];
    ast_train_config tc;
    ast_model_config mc;
} train_setup;

/* yaml: the config text; overrides: NULL-terminated "key=value" list (may
 * be NULL). Any failure fails the test with its message. Progress is off. */
void train_setup_open(train_setup *s, const char *yaml, const char *const *overrides);
void train_setup_close(train_setup *s);

/* A fresh directory /tmp/alphast-<tag>-XXXXXX (one of 4 rotating buffers). */
char *train_tmp_dir(const char *tag);

#endif
