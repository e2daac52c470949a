/* io/tfevents.h: TensorBoard's event files (logging.logger: tensorboard).
 * A file is a sequence of records: the length (uint64, little-endian), the
 * masked CRC-32C of those 8 bytes, an Event message in protobuf's wire
 * format, and its masked CRC-32C. The first Event says the format,
 * "brain.Event:2"; each scalar is an Event of its own (wall time, step,
 * summary with one tag and simple_value), as TensorFlow writes them. */
#ifndef ALPHAST_TFEVENTS_H
#define ALPHAST_TFEVENTS_H

#include <stdint.h>

#include "base/base.h"

typedef struct ast_tfevents ast_tfevents;

/* Creates DIR/events.out.tfevents.SECONDS.HOST.PID (SECONDS in 10 digits:
 * TensorBoard reads a directory's files in the order of their names) and
 * writes the format Event, then SessionLog START at first_step, the first
 * step the run will log: TensorBoard drops the points at or after it that
 * earlier files of DIR hold (an attempt killed past its last checkpoint, a
 * run started over). NULL with e set. */
ast_tfevents *ast_tfevents_open(const char *dir, double wall_time, int64_t first_step, ast_error *e);

/* One scalar, buffered until ast_tfevents_flush. */
void ast_tfevents_scalar(ast_tfevents *w, double wall_time, int64_t step, const char *tag, float value);

/* Writes out what is buffered: 0, or -1 with e naming the file. */
int ast_tfevents_flush(ast_tfevents *w, ast_error *e);

void ast_tfevents_close(ast_tfevents *w);

#endif
