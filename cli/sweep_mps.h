/* CUDA's Multi-Process Service for the runs of `alphast-run sweep` that
 * share a GPU (docs/gpu.md, "Sweeps on GPUs"). Without it a GPU runs one
 * process's kernels at a time and switches processes by time slices, so
 * runs of small steps queue behind each other; with it their kernels run
 * side by side. The local executor starts a control daemon of its own for
 * the sweep (its pipes and logs in a fresh /tmp/alphast-mps-XXXXXX, given
 * to the runs as CUDA_MPS_PIPE_DIRECTORY) and quits it when the runs end. */
#ifndef ALPHAST_CLI_SWEEP_MPS_H
#define ALPHAST_CLI_SWEEP_MPS_H

#include "base/base.h"

typedef enum sweep_mps_mode {
    SWEEP_MPS_AUTO, /* when runs share a GPU and nvidia-cuda-mps-control is on PATH */
    SWEEP_MPS_ON,   /* when runs share a GPU; an error if the daemon cannot start */
    SWEEP_MPS_OFF,
} sweep_mps_mode;

typedef struct sweep_mps {
    char dir[64];       /* the daemon's directory, "" when this sweep started none */
    char control[4096]; /* the nvidia-cuda-mps-control it started */
} sweep_mps;

/* "auto", "on", "off" into *mode; -1 for anything else. */
int sweep_mps_mode_parse(const char *text, sweep_mps_mode *mode);

/* Starts the daemon when mode asks for it and runs_per_gpu > 1 (on a GPU
 * at all: gpus_used), unless one is already there for this process
 * (CUDA_MPS_PIPE_DIRECTORY set, or the system's in /tmp/nvidia-mps): then
 * the runs use that one. Sets CUDA_MPS_PIPE_DIRECTORY and
 * CUDA_MPS_LOG_DIRECTORY for the runs. 0, also when none was wanted or
 * (auto) none could start (a warning says why); -1 with e set when mode is
 * on and it cannot start. */
int sweep_mps_start(sweep_mps *m, sweep_mps_mode mode, int gpus_used, int runs_per_gpu, ast_error *e);

/* Quits the daemon this sweep started (its servers end with their last
 * client), keeps its control log as DIR/mps-control.log and removes its
 * directory. Nothing when none was started. */
void sweep_mps_stop(sweep_mps *m, const char *sweep_dir);

#endif
