/* `alphast-run sweep --status DIR` (sweep_status.c). */
#ifndef ALPHAST_CLI_SWEEP_STATUS_H
#define ALPHAST_CLI_SWEEP_STATUS_H

/* Prints the counts of done, running, pending and failed runs, then each
 * run not done: a running one with its runner's host, pid, Slurm job and
 * time (or that its runner died), a pending one with why it went back, a
 * failed one with its reason. Returns the command's exit status. */
int sweep_status(const char *dir);

#endif
