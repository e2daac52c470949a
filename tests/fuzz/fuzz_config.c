/* The YAML config loader and dumper: any text either loads or fails with a
 * message; a config that loads dumps, and the dump loads back to the same
 * config (the dump of the dump is the same text). */
#include "fuzz_cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(text, "fuzz.yaml", &e);
    if (cfg) {
        fuzz_cfg_roundtrip(cfg);
        ast_cfg_free(cfg);
    } else {
        FUZZ_CHECK_ERROR(&e, "ast_cfg_load_string");
    }
    free(text);
    return 0;
}
