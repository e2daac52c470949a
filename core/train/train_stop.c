/* The signals that ask the training loop to stop at the next optimiser-step
 * boundary (train_stop.h). The handler does one async-signal-safe thing:
 * it stores the signal's number in a sig_atomic_t that the loop reads
 * between steps, where writing a checkpoint is safe. */
#include <signal.h>
#include <stddef.h>

#include "train/train_stop.h"

static volatile sig_atomic_t stop_signal;

static const int caught[] = {SIGUSR1, SIGTERM, SIGINT};
#define N_CAUGHT (sizeof caught / sizeof caught[0])
static struct sigaction saved[N_CAUGHT];
static int replaced[N_CAUGHT];
static int installed; /* catches not yet released: the command's and the loop's nest */

static void on_stop(int sig)
{
    if (!stop_signal) stop_signal = sig;
}

void ast_train_stop_catch(void)
{
    if (installed++) return;
    stop_signal = 0;
    for (size_t i = 0; i < N_CAUGHT; i++) {
        /* A signal ignored from the start stays ignored (nohup, `cmd &`). */
        replaced[i] = sigaction(caught[i], NULL, &saved[i]) == 0 && saved[i].sa_handler != SIG_IGN;
        if (!replaced[i]) continue;
        /* SIGUSR1 is only a warning and may come again; a second SIGTERM or
         * Ctrl-C means "now", so those handlers reset themselves. */
        struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART | (caught[i] == SIGUSR1 ? 0 : SA_RESETHAND)};
        sigemptyset(&sa.sa_mask);
        sigaction(caught[i], &sa, NULL);
    }
}

void ast_train_stop_release(void)
{
    if (!installed || --installed) return;
    for (size_t i = 0; i < N_CAUGHT; i++)
        if (replaced[i]) sigaction(caught[i], &saved[i], NULL);
}

int ast_train_stop_signal(void) { return stop_signal; }
