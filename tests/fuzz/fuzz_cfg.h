/* The config round trip both config targets check: a config that loaded
 * dumps, the dump loads again and dumps to the same text. */
#ifndef ALPHAST_FUZZ_CFG_H
#define ALPHAST_FUZZ_CFG_H

#include "config/config.h"
#include "fuzz.h"

static void fuzz_cfg_roundtrip(const ast_cfg *cfg)
{
    ast_error e = {""};
    char *first = ast_cfg_dump_string(cfg, &e);
    FUZZ_CHECK(first, "a config that loaded cannot be dumped: %s", e.msg);
    ast_cfg *again = ast_cfg_load_string(first, "dump.yaml", &e);
    FUZZ_CHECK(again, "the dump does not load again: %s\n--- the dump:\n%s", e.msg, first);
    char *second = ast_cfg_dump_string(again, &e);
    FUZZ_CHECK(second, "the reloaded dump cannot be dumped: %s", e.msg);
    FUZZ_CHECK(!strcmp(first, second), "dump, load, dump changed the config\n--- first:\n%s--- second:\n%s", first,
               second);
    free(second);
    ast_cfg_free(again);
    free(first);
}

#endif
