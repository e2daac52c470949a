/* Where the local executor of `alphast-run sweep` puts the runs whose
 * device is not the CPU (docs/gpu.md): the GPUs it may use, from --gpus,
 * the script's executor = {gpus = {...}} or, by default, every GPU that
 * `nvidia-smi -L` lists (one, GPU 0, when it lists none or is missing).
 * Each such run's process sees one GPU (CUDA_VISIBLE_DEVICES). */
#ifndef ALPHAST_CLI_SWEEP_GPUS_H
#define ALPHAST_CLI_SWEEP_GPUS_H

#include "sweep/sweep.h"

/* "0,1,3" into a list of *n GPU numbers (malloc'd into *gpus); -1 with e
 * set when it is not a comma-separated list of numbers 0..4095. */
int sweep_gpus_parse(const char *text, int **gpus, int *n, ast_error *e);

/* The GPUs `nvidia-smi -L` lists, numbered 0..n-1 (malloc'd into *gpus);
 * just GPU 0 when it lists none or cannot run. Returns n. */
int sweep_gpus_detect(int **gpus);

/* 1 when run r trains on a GPU: its config's device, or `device` (--device)
 * when not NULL, is not "cpu". */
int sweep_gpus_wanted(const ast_sweep_run *r, const char *device);

#endif
