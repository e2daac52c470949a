/* The GPUs of the local executor (sweep_gpus.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep_gpus.h"

#define MAX_GPU 4095

int sweep_gpus_parse(const char *text, int **gpus, int *n, ast_error *e)
{
    int cap = 1;
    for (const char *c = text; *c; c++) cap += *c == ',';
    int *list = ast_xcalloc((size_t)cap, sizeof *list), k = 0;
    for (const char *at = text;; at++) {
        char *end;
        long v = strtol(at, &end, 10);
        if (end == at || v < 0 || v > MAX_GPU || (*end && *end != ',') || *at == '-' || *at == '+' || *at == ' ') {
            ast_error_set(e, "--gpus %s: expected GPU numbers separated by commas (0,1,2), as nvidia-smi -L numbers them",
                          text);
            free(list);
            return -1;
        }
        list[k++] = (int)v;
        if (!*end) break;
        at = end;
    }
    *gpus = list, *n = k;
    return 0;
}

int sweep_gpus_detect(int **gpus)
{
    int n = 0;
    char line[512];
    /* One line per GPU: "GPU 0: NVIDIA H200 (UUID: GPU-...)". */
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
    while (p && fgets(line, sizeof line, p)) n += !strncmp(line, "GPU ", 4);
    if (p) pclose(p);
    n = n > 0 ? n : 1;
    *gpus = ast_xcalloc((size_t)n, sizeof **gpus);
    for (int i = 0; i < n; i++) (*gpus)[i] = i;
    return n;
}

int sweep_gpus_wanted(const ast_sweep_run *r, const char *device)
{
    const char *d = device ? device : r->device;
    return d && strcmp(d, "cpu") != 0;
}
